// Package gpudriver describes what the GPU DRA drivers DOKS installs publish:
// NVIDIA's k8s-dra-driver-gpu (add-on nvidia_gpu_dra_driver, driver
// gpu.nvidia.com) and AMD's k8s-gpu-dra-driver (add-on amd_gpu_dra_driver,
// driver gpu.amd.com). Each driver's kubelet plugin publishes one
// ResourceSlice per node, in a pool named after the node, with one device
// per whole GPU; each driver's chart installs one DeviceClass named after
// the driver.
//
// The provider uses it to give GPU pool templates the devices a new node
// will have, so that claim pods can grow a pool from zero; the sandbox uses
// it to play the driver. Only what a droplet size determines is here (GPU
// model, count, memory); what differs per machine (UUIDs, PCI addresses,
// driver versions, NUMA nodes) is left to whoever publishes a real node's
// slice.
package gpudriver

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Driver names, as the drivers register them (NVIDIA: cmd/gpu-kubelet-plugin
// DriverName; AMD: its DeviceClass and kubelet plugin).
const (
	NVIDIA = "gpu.nvidia.com"
	AMD    = "gpu.amd.com"
)

// Device types: the "type" attribute of a whole GPU (NVIDIA's
// GpuDeviceType, AMD's AmdGpuDeviceType). MIG devices and partitions, which
// DOKS does not configure, have other types.
const (
	NVIDIADeviceType = "gpu"
	AMDDeviceType    = "amdgpu"
)

// DriverForVendor maps DOKS's GPU vendor (a node pool template's gpu.vendor,
// the gpu-brand label: "nvidia", "amd") to its DRA driver; "" when unknown.
func DriverForVendor(vendor string) string {
	v := strings.ToLower(vendor)
	switch {
	case strings.Contains(v, "amd"):
		return AMD
	case strings.Contains(v, "nvidia"):
		return NVIDIA
	}
	return ""
}

// Model is what a driver reads from one GPU model's hardware.
type Model struct {
	// ProductName as the driver reports it: NVML's device name for NVIDIA;
	// sysfs product_name with spaces turned into underscores for AMD.
	ProductName string
	// Memory of one GPU: the "memory" capacity both drivers publish.
	Memory resource.Quantity
	// NVIDIA only: NVML's brand and architecture strings, and the CUDA
	// compute capability (published as a version, e.g. 9.0.0).
	Brand, Architecture, ComputeCapability string
	// AMD only: the PCI device ID, and the compute and SIMD units the
	// driver publishes as capacity.
	DeviceID                string
	ComputeUnits, SIMDUnits int64
}

// Models are the GPUs of DigitalOcean's GPU droplet sizes, by the model name
// DOKS reports (node pool template gpu.model, Sizes API gpu_info.model).
// Memory is the size's VRAM per GPU (gpu_info.vram / gpu_info.count).
var Models = map[string]Model{
	"nvidia_h100":         {ProductName: "NVIDIA H100 80GB HBM3", Memory: resource.MustParse("80Gi"), Brand: "Nvidia", Architecture: "Hopper", ComputeCapability: "9.0.0"},
	"nvidia_h200":         {ProductName: "NVIDIA H200", Memory: resource.MustParse("141Gi"), Brand: "Nvidia", Architecture: "Hopper", ComputeCapability: "9.0.0"},
	"nvidia_l40s":         {ProductName: "NVIDIA L40S", Memory: resource.MustParse("48Gi"), Brand: "Nvidia", Architecture: "Ada Lovelace", ComputeCapability: "8.9.0"},
	"nvidia_rtx_4000_ada": {ProductName: "NVIDIA RTX 4000 Ada Generation", Memory: resource.MustParse("20Gi"), Brand: "NvidiaRTX", Architecture: "Ada Lovelace", ComputeCapability: "8.9.0"},
	"nvidia_rtx_6000_ada": {ProductName: "NVIDIA RTX 6000 Ada Generation", Memory: resource.MustParse("48Gi"), Brand: "NvidiaRTX", Architecture: "Ada Lovelace", ComputeCapability: "8.9.0"},
	"amd_mi300x":          {ProductName: "AMD_Instinct_MI300X_OAM", Memory: resource.MustParse("192Gi"), DeviceID: "0x74a1", ComputeUnits: 304, SIMDUnits: 1216},
	"amd_mi325x":          {ProductName: "AMD_Instinct_MI325X_OAM", Memory: resource.MustParse("256Gi"), DeviceID: "0x74a5", ComputeUnits: 304, SIMDUnits: 1216},
}

// DeviceName is the name the driver gives a node's i-th GPU: NVIDIA names
// devices gpu-<minor>, AMD gpu-<card>-<renderD> (render nodes start at 128).
func DeviceName(driver string, i int) string {
	if driver == AMD {
		return fmt.Sprintf("gpu-%d-%d", i, 128+i)
	}
	return fmt.Sprintf("gpu-%d", i)
}

// Devices returns the whole-GPU devices of a node with count GPUs of model,
// with the attributes and capacities a size determines. An unknown model
// still gives count devices of the driver's type, so that claims asking
// only for "a GPU of this driver" can be simulated.
func Devices(driver, model string, count int) []resourceapi.Device {
	m, known := Models[model]
	out := make([]resourceapi.Device, 0, count)
	for i := 0; i < count; i++ {
		d := resourceapi.Device{
			Name:       DeviceName(driver, i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		}
		str := func(name, v string) {
			if v != "" {
				d.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{StringValue: ptr.To(v)}
			}
		}
		capacity := func(name string, q resource.Quantity) {
			if d.Capacity == nil {
				d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
			}
			d.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: q}
		}
		switch driver {
		case NVIDIA:
			str("type", NVIDIADeviceType)
			if known {
				str("productName", m.ProductName)
				str("brand", m.Brand)
				str("architecture", m.Architecture)
				d.Attributes["cudaComputeCapability"] = resourceapi.DeviceAttribute{VersionValue: ptr.To(m.ComputeCapability)}
				capacity("memory", m.Memory)
			}
		case AMD:
			str("type", AMDDeviceType)
			if known {
				str("productName", m.ProductName)
				str("deviceID", m.DeviceID)
				capacity("memory", m.Memory)
				capacity("computeUnits", *resource.NewQuantity(m.ComputeUnits, resource.BinarySI))
				capacity("simdUnits", *resource.NewQuantity(m.SIMDUnits, resource.BinarySI))
			}
		}
		out = append(out, d)
	}
	return out
}

// Slice is the ResourceSlice the driver publishes for a node: the pool is
// named after the node and holds this one slice. Its name is the API
// server's generateName (<node>-<driver>-); Name is set here for objects
// that never reach the API server, such as templates.
func Slice(nodeName, driver, model string, count int) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + driver, GenerateName: nodeName + "-" + driver + "-"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(nodeName),
			Devices:  Devices(driver, model, count),
		},
	}
}

// DeviceClass is the DeviceClass the driver's chart installs. NVIDIA's
// selects whole GPUs of its driver and, on resource.k8s.io/v1, maps the
// nvidia.com/gpu extended resource to the class; AMD's selects every device
// of its driver.
func DeviceClass(driver string) *resourceapi.DeviceClass {
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: driver}}
	switch driver {
	case NVIDIA:
		dc.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}}
		dc.Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu")
	default:
		dc.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == '%s'", driver)}}}
	}
	return dc
}
