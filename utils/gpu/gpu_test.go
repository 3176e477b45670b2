package gpu

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    apiv1.ResourceList
		want apiv1.ResourceName
	}{
		{"none", nil, ""},
		{"cpu only", apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("2")}, ""},
		{"zero GPUs", apiv1.ResourceList{ResourceNvidiaGPU: resource.MustParse("0")}, ""},
		{"nvidia", apiv1.ResourceList{ResourceNvidiaGPU: resource.MustParse("1")}, ResourceNvidiaGPU},
		{"amd", apiv1.ResourceList{ResourceAMDGPU: resource.MustParse("8")}, ResourceAMDGPU},
		{"directx", apiv1.ResourceList{ResourceDirectX: resource.MustParse("1")}, ResourceDirectX},
		{"nvidia first", apiv1.ResourceList{ResourceAMDGPU: resource.MustParse("1"), ResourceNvidiaGPU: resource.MustParse("1")}, ResourceNvidiaGPU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := In(tc.l)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("In(%v) = %q, %v; want %q", tc.l, got, ok, tc.want)
			}
		})
	}
}
