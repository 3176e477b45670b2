package dra

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

func TestDriversLabel(t *testing.T) {
	slice := func(driver string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver}}
	}
	for _, tc := range []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		want   string
	}{
		{"no slices", nil, ""},
		{"one NVIDIA GPU driver", []*resourceapi.ResourceSlice{slice("gpu.nvidia.com")}, "gpu.nvidia.com"},
		{"AMD's driver by name", []*resourceapi.ResourceSlice{slice("gpu.amd.com")}, "gpu.amd.com"},
		{"two slices of one driver counted once", []*resourceapi.ResourceSlice{slice("gpu.nvidia.com"), slice("gpu.nvidia.com")}, "gpu.nvidia.com"},
		{"sorted", []*resourceapi.ResourceSlice{slice("gpu.nvidia.com"), slice("compute-domain.nvidia.com")}, "compute-domain.nvidia.com,gpu.nvidia.com"},
		{"unknown drivers folded", []*resourceapi.ResourceSlice{slice("fpga.example.com"), slice("nic.example.com"), slice("gpu.nvidia.com")}, "custom.driver,gpu.nvidia.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DriversLabel(tc.slices); got != tc.want {
				t.Errorf("DriversLabel = %q, want %q", got, tc.want)
			}
		})
	}
}
