package gpudriver

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

// matches evaluates a CEL selector against a device as the scheduler's
// structured allocator does.
func matches(t *testing.T, expr, driver string, d resourceapi.Device) bool {
	t.Helper()
	res := cel.GetCompiler(cel.Features{}).CompileCELExpression(expr, cel.Options{})
	if res.Error != nil {
		t.Fatalf("compile %q: %v", expr, res.Error)
	}
	ok, _, err := res.DeviceMatches(context.Background(), cel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity})
	if err != nil {
		t.Fatalf("%q on %s: %v", expr, d.Name, err)
	}
	return ok
}

// A node's slice holds one device per GPU of its size, each selected by its
// driver's DeviceClass and not by the other driver's, and claims can select
// them by the attributes and memory the real drivers publish.
func TestSlicePerSize(t *testing.T) {
	cases := []struct {
		vendor, model string
		count         int
		driver        string
		names         []string
		selector      string // a claim's selector the devices must satisfy
	}{
		{"nvidia", "nvidia_h100", 1, NVIDIA, []string{"gpu-0"},
			"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"},
		{"nvidia", "nvidia_h100", 8, NVIDIA, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"},
			"device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))"},
		{"nvidia", "nvidia_l40s", 1, NVIDIA, []string{"gpu-0"},
			"device.attributes['gpu.nvidia.com'].architecture == 'Ada Lovelace'"},
		{"amd", "amd_mi300x", 1, AMD, []string{"gpu-0-128"},
			"device.attributes['gpu.amd.com'].type == 'amdgpu' && device.capacity['gpu.amd.com'].memory.compareTo(quantity('192Gi')) >= 0"},
		{"AMD", "amd_mi325x", 8, AMD, []string{"gpu-0-128", "gpu-1-129", "gpu-2-130", "gpu-3-131", "gpu-4-132", "gpu-5-133", "gpu-6-134", "gpu-7-135"},
			"device.capacity['gpu.amd.com'].computeUnits.compareTo(quantity('304')) == 0"},
		// A model this build does not know still gives typed devices.
		{"nvidia", "nvidia_b300", 2, NVIDIA, []string{"gpu-0", "gpu-1"},
			"device.attributes['gpu.nvidia.com'].type == 'gpu'"},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			driver := DriverForVendor(c.vendor)
			if driver != c.driver {
				t.Fatalf("DriverForVendor(%q) = %q, want %q", c.vendor, driver, c.driver)
			}
			s := Slice("gpu-node-1", driver, c.model, c.count)
			if s.Spec.Driver != c.driver || *s.Spec.NodeName != "gpu-node-1" || s.Spec.Pool.Name != "gpu-node-1" || s.Spec.Pool.ResourceSliceCount != 1 {
				t.Fatalf("slice spec %+v: want driver %s, node and pool gpu-node-1, one slice", s.Spec, c.driver)
			}
			var names []string
			for _, d := range s.Spec.Devices {
				names = append(names, d.Name)
				if !matches(t, DeviceClass(c.driver).Spec.Selectors[0].CEL.Expression, c.driver, d) {
					t.Errorf("%s: the %s DeviceClass does not select it", d.Name, c.driver)
				}
				other := NVIDIA
				if c.driver == NVIDIA {
					other = AMD
				}
				if matches(t, DeviceClass(other).Spec.Selectors[0].CEL.Expression, c.driver, d) {
					t.Errorf("%s: the %s DeviceClass selects it", d.Name, other)
				}
				if !matches(t, c.selector, c.driver, d) {
					t.Errorf("%s: %q does not select it", d.Name, c.selector)
				}
			}
			if len(names) != len(c.names) {
				t.Fatalf("devices %v, want %v", names, c.names)
			}
			for i := range names {
				if names[i] != c.names[i] {
					t.Fatalf("devices %v, want %v", names, c.names)
				}
			}
		})
	}
	if got := DriverForVendor("intel"); got != "" {
		t.Errorf("DriverForVendor(intel) = %q, want none", got)
	}
}
