package digitalocean

import (
	"strings"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
)

var _ cloudprovider.DRAAware = (*CloudProvider)(nil)

// SetDRAListers implements cloudprovider.DRAAware: GPU templates follow the
// DRA drivers the listers show.
func (p *CloudProvider) SetDRAListers(l cloudprovider.DRAListers) {
	p.m.dra.Store(&l)
}

// draDriverRuns reports whether the cluster runs the GPU DRA driver: DOKS's
// nvidia_gpu_dra_driver / amd_gpu_dra_driver add-ons install the driver's
// DeviceClass with it, and its kubelet plugin publishes ResourceSlices. On
// DOKS the add-on replaces the vendor's device plugin, so this also says
// that the vendor's GPUs are not an extended resource. Without listers (no
// cluster view yet) it is false: the device plugin's world, as before DRA.
func (m *manager) draDriverRuns(driver string) bool {
	l := m.dra.Load()
	if l == nil {
		return false
	}
	if l.DeviceClasses != nil {
		classes, err := l.DeviceClasses.List(labels.Everything())
		if err != nil {
			klog.InfoS("DigitalOcean provider: listing DeviceClasses failed", "err", err)
		}
		for _, c := range classes {
			if deviceClassOf(c, driver) {
				return true
			}
		}
	}
	if l.ResourceSlices != nil {
		slices, err := l.ResourceSlices.List(labels.Everything())
		if err != nil {
			klog.InfoS("DigitalOcean provider: listing ResourceSlices failed", "err", err)
		}
		for _, s := range slices {
			if s.Spec.Driver == driver {
				return true
			}
		}
	}
	return false
}

// deviceClassOf reports whether c is a class of driver's devices: it is
// named after the driver (as both drivers' charts name theirs) or one of
// its selectors names the driver.
func deviceClassOf(c *resourceapi.DeviceClass, driver string) bool {
	if c.Name == driver {
		return true
	}
	for _, s := range c.Spec.Selectors {
		if s.CEL != nil && (strings.Contains(s.CEL.Expression, "'"+driver+"'") || strings.Contains(s.CEL.Expression, `"`+driver+`"`)) {
			return true
		}
	}
	return false
}

// gpuSlices gives a GPU pool's template node the devices its vendor's DRA
// driver will publish for it, when that driver runs: one device per GPU of
// the size, in the slice the driver publishes (pool named after the node),
// and no extended resource, which the driver's add-on leaves no device
// plugin to advertise. nil (node unchanged) for other pools and on a
// device-plugin cluster.
func gpuSlices(node *apiv1.Node, gpu *godo.KubernetesNodePoolGPUResources, driverRuns func(string) bool) []*resourceapi.ResourceSlice {
	if gpu == nil || gpu.Count <= 0 {
		return nil
	}
	driver := gpudriver.DriverForVendor(gpu.Vendor)
	if driver == "" || !driverRuns(driver) {
		return nil
	}
	res := gpuResourceForVendor(gpu.Vendor)
	delete(node.Status.Capacity, res)
	delete(node.Status.Allocatable, res)
	return []*resourceapi.ResourceSlice{gpudriver.Slice(node.Name, driver, gpu.Model, int(gpu.Count))}
}
