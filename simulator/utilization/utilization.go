// Package utilization computes how much of a node its pods request, the
// figure scale-down compares with --scale-down-utilization-threshold.
package utilization

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Info is a node's utilization. Utilization is the figure to compare with
// the threshold; ResourceName says which resource it comes from
// ("<driver>/<pool>" for a node's DRA devices, as upstream names it).
type Info struct {
	CpuUtil             float64
	MemUtil             float64
	GpuUtil             float64
	DynamicResourceUtil float64
	Utilization         float64
	ResourceName        apiv1.ResourceName
}

// CalculateWithClaims is Calculate for a node that may publish devices for
// Dynamic Resource Allocation (ni's ResourceSlices); claims are those of its
// pods. Such a node is as used as its most used pool of devices, whatever
// its cpu and memory, as upstream counts it: a GPU node whose only device is
// allocated is fully used. A GPU advertised as an extended resource
// (gpuResource) still comes first.
func CalculateWithClaims(ni *framework.NodeInfo, claims []*resourceapi.ResourceClaim, skipDaemonSetPods bool, gpuResource apiv1.ResourceName) (Info, error) {
	if ni == nil || ni.Node() == nil {
		return Info{}, fmt.Errorf("node info without a node")
	}
	if gpuResource != "" {
		if q, ok := ni.Node().Status.Allocatable[gpuResource]; ok && !q.IsZero() {
			return Calculate(ni, skipDaemonSetPods, gpuResource)
		}
	}
	best, ok, err := dra.HighestUtilization(ni.ResourceSlices(), claims)
	if err != nil {
		return Info{}, fmt.Errorf("node %s: devices: %w", ni.Node().Name, err)
	}
	if !ok {
		return Calculate(ni, skipDaemonSetPods, gpuResource)
	}
	return Info{DynamicResourceUtil: best.Utilization, Utilization: best.Utilization,
		ResourceName: apiv1.ResourceName(best.Driver + "/" + best.Pool)}, nil
}

// Calculate returns the requests of the node's pods over its allocatable:
// for a node with gpuResource allocatable (gpuResource non-empty), the GPU
// ratio; otherwise the larger of the cpu and memory ratios. Completed pods
// are not counted; DaemonSet pods are left out when skipDaemonSetPods; mirror
// (static) pods always count, since they cannot go elsewhere. Each pod counts
// with framework.PodRequests, as the scheduler counts it.
func Calculate(ni *framework.NodeInfo, skipDaemonSetPods bool, gpuResource apiv1.ResourceName) (Info, error) {
	if ni == nil || ni.Node() == nil {
		return Info{}, fmt.Errorf("node info without a node")
	}
	requests := func(p *apiv1.Pod) *Requests {
		r := RequestsOf(p, gpuResource)
		return &r
	}
	return CalculateWith(ni.Node(), ni.Pods(), skipDaemonSetPods, gpuResource, requests)
}

// Requests are the parts of a pod's requests Calculate counts, in
// thousandths of their unit (what the ratio to allocatable reads): cpu,
// memory and, when a GPU resource is named, that resource. Three integers
// where three Quantities took 170 bytes: the planner keeps one a pod
// between loops.
type Requests struct {
	MilliCPU, MilliMemory, MilliGPU int64
}

// RequestsOf returns the pod's Requests, from framework.PodRequests; GPU is
// the request of gpuResource ("" for none).
func RequestsOf(p *apiv1.Pod, gpuResource apiv1.ResourceName) Requests {
	reqs := framework.PodRequests(p)
	out := Requests{MilliCPU: reqs.Cpu().MilliValue(), MilliMemory: reqs.Memory().MilliValue()}
	if gpuResource != "" {
		gpu := reqs[gpuResource]
		out.MilliGPU = gpu.MilliValue()
	}
	return out
}

// CalculateWith is Calculate for node and the pods on it, taking each pod's
// Requests from requests, for a caller that keeps them cached between
// loops (it is not changed); requests must answer as RequestsOf(p, gpuResource)
// does.
func CalculateWith(node *apiv1.Node, pods []*apiv1.Pod, skipDaemonSetPods bool, gpuResource apiv1.ResourceName, requests func(*apiv1.Pod) *Requests) (Info, error) {
	if node == nil {
		return Info{}, fmt.Errorf("no node")
	}
	alloc := node.Status.Allocatable

	var total Requests
	for _, p := range pods {
		if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		if skipDaemonSetPods && drain.IsDaemonSetPod(p) && !drain.IsMirrorPod(p) {
			continue
		}
		r := requests(p)
		total.MilliCPU += r.MilliCPU
		total.MilliMemory += r.MilliMemory
		total.MilliGPU += r.MilliGPU
	}

	if gpuResource != "" {
		if gpuAlloc, ok := alloc[gpuResource]; ok && !gpuAlloc.IsZero() {
			util := ratio(total.MilliGPU, gpuAlloc)
			return Info{GpuUtil: util, Utilization: util, ResourceName: gpuResource}, nil
		}
	}

	cpuAlloc, ok := alloc[apiv1.ResourceCPU]
	if !ok || cpuAlloc.IsZero() {
		return Info{}, fmt.Errorf("node %s has no allocatable cpu", node.Name)
	}
	memAlloc, ok := alloc[apiv1.ResourceMemory]
	if !ok || memAlloc.IsZero() {
		return Info{}, fmt.Errorf("node %s has no allocatable memory", node.Name)
	}
	info := Info{
		CpuUtil: ratio(total.MilliCPU, cpuAlloc),
		MemUtil: ratio(total.MilliMemory, memAlloc),
	}
	if info.CpuUtil >= info.MemUtil {
		info.Utilization, info.ResourceName = info.CpuUtil, apiv1.ResourceCPU
	} else {
		info.Utilization, info.ResourceName = info.MemUtil, apiv1.ResourceMemory
	}
	return info, nil
}

func ratio(milliUsed int64, allocatable resource.Quantity) float64 {
	return float64(milliUsed) / float64(allocatable.MilliValue())
}
