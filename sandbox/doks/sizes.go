package doks

import (
	"fmt"
	"sort"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// sizeInfo is one Droplet size of the simulator's catalogue. Prices are close
// to DigitalOcean's public list prices; allocatable figures imitate what a
// DOKS node reports after the kubelet's and system reservations.
type sizeInfo struct {
	slug         string
	vcpus        int
	memoryMB     int
	diskGB       int
	priceMonthly float64
	priceHourly  float64
	// allocatable CPU in milli-cores and memory in MiB.
	allocMilli int64
	allocMemMi int64
	gpuVendor  string // "nvidia", "amd" or "" for none
	gpuModel   string
	gpuCount   int64
	gpuVRAMGB  int
	// regions the size is offered in; allRegions when nil.
	regions []string
}

// allRegions are the regions of the simulator's general-purpose sizes.
var allRegions = []string{"ams3", "atl1", "fra1", "lon1", "nyc1", "nyc2", "nyc3", "sfo3", "sgp1", "tor1"}

func (s sizeInfo) availableIn() []string {
	if s.regions == nil {
		return allRegions
	}
	return s.regions
}

// podsPerNode is what a DOKS kubelet advertises.
const podsPerNode = 110

// catalogue is the simulator's /v2/sizes answer, in slug order.
var catalogue = buildCatalogue()

func buildCatalogue() []sizeInfo {
	s := func(slug string, vcpus, memMB, disk int, monthly float64) sizeInfo {
		return sizeInfo{slug: slug, vcpus: vcpus, memoryMB: memMB, diskGB: disk,
			priceMonthly: monthly, priceHourly: roundPrice(monthly / 672)}
	}
	gpu := func(slug string, vcpus, memMB, disk int, hourly float64, vendor, model string, count int64, vram int) sizeInfo {
		return sizeInfo{slug: slug, vcpus: vcpus, memoryMB: memMB, diskGB: disk,
			priceHourly: hourly, priceMonthly: roundPrice(hourly * 672),
			gpuVendor: vendor, gpuModel: model, gpuCount: count, gpuVRAMGB: vram}
	}
	list := []sizeInfo{
		s("s-1vcpu-2gb", 1, 2048, 50, 12),
		s("s-2vcpu-2gb", 2, 2048, 60, 18),
		s("s-2vcpu-4gb", 2, 4096, 80, 24),
		s("s-4vcpu-8gb", 4, 8192, 160, 48),
		s("s-8vcpu-16gb", 8, 16384, 320, 96),
		s("c-2", 2, 4096, 25, 42),
		s("c-4", 4, 8192, 50, 84),
		s("c-8", 8, 16384, 100, 168),
		s("g-2vcpu-8gb", 2, 8192, 25, 63),
		s("g-4vcpu-16gb", 4, 16384, 50, 126),
		s("m-2vcpu-16gb", 2, 16384, 50, 84),
		gpu("gpu-4000adax1-20gb", 8, 32768, 500, 0.76, "nvidia", "nvidia_rtx_4000_ada", 1, 20),
		gpu("gpu-l40sx1-48gb", 8, 65536, 500, 1.57, "nvidia", "nvidia_l40s", 1, 48),
		gpu("gpu-h100x1-80gb", 20, 245760, 720, 3.39, "nvidia", "nvidia_h100", 1, 80),
		gpu("gpu-h100x8-640gb", 160, 1966080, 2046, 23.92, "nvidia", "nvidia_h100", 8, 640),
		gpu("gpu-mi300x1-192gb", 20, 245760, 720, 1.99, "amd", "amd_mi300x", 1, 192),
	}
	// Not every size is offered everywhere: the AMD size is in two
	// regions only, so a cluster elsewhere cannot create a pool of it.
	for i := range list {
		if list[i].slug == "gpu-mi300x1-192gb" {
			list[i].regions = []string{"atl1", "tor1"}
		}
	}
	for i := range list {
		list[i].allocMilli, list[i].allocMemMi = allocatable(list[i].vcpus, list[i].memoryMB)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].slug < list[j].slug })
	return list
}

func roundPrice(p float64) float64 {
	return float64(int64(p*100000+0.5)) / 100000
}

// allocatable models the reservations of a DOKS node: small nodes lose a
// large share of their single core to system daemons (s-1vcpu-2gb reports
// 390m allocatable), larger ones a fixed slice; memory loses a quarter up to
// 2 GiB plus the eviction threshold.
func allocatable(vcpus, memMB int) (milli int64, memMi int64) {
	cpu := int64(vcpus) * 1000
	switch {
	case vcpus == 1:
		milli = 390
	case vcpus <= 4:
		milli = cpu - 100
	default:
		milli = cpu - 200
	}
	reserve := int64(memMB) / 4
	if reserve > 2048 {
		reserve = 2048
	}
	return milli, int64(memMB) - reserve - 100
}

func lookupSize(slug string) (sizeInfo, bool) {
	for _, s := range catalogue {
		if s.slug == slug {
			return s, true
		}
	}
	return sizeInfo{}, false
}

// gpuResourceName is the extended resource a device plugin of this vendor
// advertises.
func gpuResourceName(vendor string) apiv1.ResourceName {
	if vendor == "amd" {
		return "amd.com/gpu"
	}
	return "nvidia.com/gpu"
}

// SizeGPU returns the GPUs of a droplet size: vendor ("nvidia", "amd"),
// model as the Sizes API names it, and count. count is 0 for a size without
// GPUs or outside the catalogue.
func SizeGPU(slug string) (vendor, model string, count int) {
	s, _ := lookupSize(slug)
	return s.gpuVendor, s.gpuModel, int(s.gpuCount)
}

// SizePrice returns a size's hourly price in the simulated catalogue (what
// the Sizes API's price_hourly says), so a benchmark can price a cluster as the
// autoscaler sees it. ok is false for a slug outside the catalogue.
func SizePrice(slug string) (hourly float64, ok bool) {
	s, found := lookupSize(slug)
	return s.priceHourly, found
}

// SizeResources returns the capacity and allocatable of a node of the given
// size, as the simulated node agent registers it and as node pool templates
// describe it. ok is false for a slug outside the catalogue.
func SizeResources(slug string) (capacity, allocatable apiv1.ResourceList, ok bool) {
	s, found := lookupSize(slug)
	if !found {
		return nil, nil, false
	}
	capacity = apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewMilliQuantity(int64(s.vcpus)*1000, resource.DecimalSI),
		apiv1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", s.memoryMB)),
		apiv1.ResourcePods:   *resource.NewQuantity(podsPerNode, resource.DecimalSI),
	}
	allocatable = apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewMilliQuantity(s.allocMilli, resource.DecimalSI),
		apiv1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", s.allocMemMi)),
		apiv1.ResourcePods:   *resource.NewQuantity(podsPerNode, resource.DecimalSI),
	}
	if s.gpuCount > 0 {
		name := gpuResourceName(s.gpuVendor)
		capacity[name] = *resource.NewQuantity(s.gpuCount, resource.DecimalSI)
		allocatable[name] = *resource.NewQuantity(s.gpuCount, resource.DecimalSI)
	}
	return capacity, allocatable, true
}

// godoSize renders a catalogue entry as the Sizes API does.
func (s sizeInfo) godoSize() godo.Size {
	out := godo.Size{
		Slug:         s.slug,
		Memory:       s.memoryMB,
		Vcpus:        s.vcpus,
		Disk:         s.diskGB,
		PriceMonthly: s.priceMonthly,
		PriceHourly:  s.priceHourly,
		Regions:      append([]string(nil), s.availableIn()...),
		Available:    true,
		Transfer:     4,
		Description:  "Basic",
	}
	if s.gpuCount > 0 {
		out.Description = "GPU"
		out.GPUInfo = &godo.GPUInfo{Count: int(s.gpuCount), Model: s.gpuModel,
			VRAM: &godo.VRAM{Amount: s.gpuVRAMGB, Unit: "gib"}}
	}
	return out
}

// template renders the node pool template DOKS serves for a pool of this size.
func (s sizeInfo) template(clusterID, poolName string, labels map[string]string, taints []godo.Taint) *godo.KubernetesNodeTemplate {
	t := &godo.KubernetesNodeTemplate{
		ClusterUUID: clusterID,
		Name:        poolName,
		Slug:        s.slug,
		Labels:      copyLabels(labels),
		Capacity: &godo.KubernetesNodePoolResources{
			CPU:           int64(s.vcpus),
			CpuMilliCores: int64(s.vcpus) * 1000,
			Memory:        fmt.Sprintf("%dMi", s.memoryMB),
			Pods:          podsPerNode,
		},
		Allocatable: &godo.KubernetesNodePoolResources{
			CPU:           s.allocMilli / 1000,
			CpuMilliCores: s.allocMilli,
			Memory:        fmt.Sprintf("%dMi", s.allocMemMi),
			Pods:          podsPerNode,
		},
	}
	for _, taint := range taints {
		if taint.Value == "" {
			t.Taints = append(t.Taints, fmt.Sprintf("%s:%s", taint.Key, taint.Effect))
		} else {
			t.Taints = append(t.Taints, fmt.Sprintf("%s=%s:%s", taint.Key, taint.Value, taint.Effect))
		}
	}
	if s.gpuCount > 0 {
		t.Gpu = &godo.KubernetesNodePoolGPUResources{Vendor: s.gpuVendor, Model: s.gpuModel, Count: s.gpuCount}
	}
	return t
}
