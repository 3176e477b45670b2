package digitalocean

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// draListers serves the given objects as the autoscaler's informers would.
func draListers(t *testing.T, objs ...any) cloudprovider.DRAListers {
	t.Helper()
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *resourceapi.DeviceClass:
			err = classes.Add(o)
		case *resourceapi.ResourceSlice:
			err = slices.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return cloudprovider.DRAListers{
		DeviceClasses:  resourcelisters.NewDeviceClassLister(classes),
		ResourceSlices: resourcelisters.NewResourceSliceLister(slices),
	}
}

// On a cluster that runs a vendor's GPU DRA driver, that vendor's GPU pools
// scale from zero with the slice the driver will publish and without the
// device plugin's extended resource; other GPU pools, and every pool of a
// device-plugin cluster, keep the extended resource and carry no slice.
func TestGPUTemplatesFollowTheClusterDRADrivers(t *testing.T) {
	otherNodeSlice := gpudriver.Slice("gpu-node-7", gpudriver.AMD, "amd_mi300x", 1)
	cases := []struct {
		name      string
		objs      []any
		nvidiaDRA bool
		amdDRA    bool
		noListers bool
	}{
		{name: "device plugins: no listers yet", noListers: true},
		{name: "device plugins: no DRA objects"},
		{name: "NVIDIA driver: its DeviceClass", objs: []any{gpudriver.DeviceClass(gpudriver.NVIDIA)}, nvidiaDRA: true},
		{name: "AMD driver: a node's slice, no class", objs: []any{otherNodeSlice}, amdDRA: true},
		{name: "a class selecting the NVIDIA driver under another name", objs: []any{&resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: "h100"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`}}}},
		}}, nvidiaDRA: true},
		{name: "both drivers", objs: []any{gpudriver.DeviceClass(gpudriver.NVIDIA), gpudriver.DeviceClass(gpudriver.AMD)}, nvidiaDRA: true, amdDRA: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, doks.Options{})
			h100x8 := e.pool(doks.PoolSpec{Name: "h100x8", Size: "gpu-h100x8-640gb", Count: 0, AutoScale: true, MaxNodes: 2})
			mi300x := e.pool(doks.PoolSpec{Name: "mi300x", Size: "gpu-mi300x1-192gb", Count: 0, AutoScale: true, MaxNodes: 2})
			cpu := e.pool(doks.PoolSpec{Name: "cpu", Size: "s-2vcpu-4gb", Count: 0, AutoScale: true, MaxNodes: 2})
			e.refresh()
			if !c.noListers {
				e.p.SetDRAListers(draListers(t, c.objs...))
			}
			for _, g := range []struct {
				poolID, driver string
				res            string
				gpus           int
				dra            bool
			}{
				{h100x8.ID, gpudriver.NVIDIA, "nvidia.com/gpu", 8, c.nvidiaDRA},
				{mi300x.ID, gpudriver.AMD, "amd.com/gpu", 1, c.amdDRA},
				{cpu.ID, "", "", 0, false},
			} {
				ni, err := e.group(g.poolID).TemplateNodeInfo()
				if err != nil {
					t.Fatal(err)
				}
				n := ni.Node()
				slices := ni.ResourceSlices()
				if g.gpus == 0 {
					if len(slices) != 0 {
						t.Errorf("CPU pool template has slices %v", slices)
					}
					continue
				}
				q, hasRes := n.Status.Allocatable[apiv1.ResourceName(g.res)]
				if !g.dra {
					if !hasRes || q.Value() != int64(g.gpus) || len(slices) != 0 {
						t.Errorf("%s: %s=%s, %d slices: want %d as an extended resource and no slice", n.Name, g.res, q.String(), len(slices), g.gpus)
					}
					continue
				}
				if hasRes {
					t.Errorf("%s: %s=%s: a DRA driver's node advertises no extended resource", n.Name, g.res, q.String())
				}
				if _, ok := n.Status.Capacity[apiv1.ResourceName(g.res)]; ok {
					t.Errorf("%s: capacity keeps %s", n.Name, g.res)
				}
				if len(slices) != 1 {
					t.Fatalf("%s: %d slices, want the driver's one", n.Name, len(slices))
				}
				s := slices[0]
				if s.Spec.Driver != g.driver || ptr.Deref(s.Spec.NodeName, "") != n.Name || s.Spec.Pool.Name != n.Name || len(s.Spec.Devices) != g.gpus {
					t.Errorf("%s: slice driver %s node %v pool %s with %d devices: want %s, the template node, %d devices",
						n.Name, s.Spec.Driver, ptr.Deref(s.Spec.NodeName, ""), s.Spec.Pool.Name, len(s.Spec.Devices), g.driver, g.gpus)
				}
				if n.Labels[LabelGPUBrand] == "" {
					t.Errorf("%s: DOKS's GPU labels stay on a DRA GPU node: %v", n.Name, n.Labels)
				}
			}
		})
	}
}
