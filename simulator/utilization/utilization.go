// Package utilization computes how much of a node its pods request, the
// figure scale-down compares with --scale-down-utilization-threshold.
package utilization

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Info is a node's utilization. Utilization is the figure to compare with
// the threshold; ResourceName says which resource it comes from.
type Info struct {
	CpuUtil      float64
	MemUtil      float64
	GpuUtil      float64
	Utilization  float64
	ResourceName apiv1.ResourceName
}

// Calculate returns the requests of the node's pods over its allocatable:
// for a node with gpuResource allocatable (gpuResource non-empty), the GPU
// ratio; otherwise the larger of the cpu and memory ratios. Completed pods
// are not counted; DaemonSet pods are left out when skipDaemonSetPods; mirror
// (static) pods always count, since they cannot go elsewhere. Each pod counts
// with framework.PodRequests, as the scheduler counts it.
func Calculate(ni *framework.NodeInfo, skipDaemonSetPods bool, gpuResource apiv1.ResourceName) (Info, error) {
	return CalculateWith(ni, skipDaemonSetPods, gpuResource, framework.PodRequests)
}

// CalculateWith is Calculate taking each pod's requests from podRequests,
// for a caller that keeps them cached between loops; podRequests must
// answer as framework.PodRequests does.
func CalculateWith(ni *framework.NodeInfo, skipDaemonSetPods bool, gpuResource apiv1.ResourceName, podRequests func(*apiv1.Pod) apiv1.ResourceList) (Info, error) {
	if ni == nil || ni.Node() == nil {
		return Info{}, fmt.Errorf("node info without a node")
	}
	node := ni.Node()
	alloc := node.Status.Allocatable

	reqs := make([]apiv1.ResourceList, 0, len(ni.Pods()))
	for _, p := range ni.Pods() {
		if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		if skipDaemonSetPods && drain.IsDaemonSetPod(p) && !drain.IsMirrorPod(p) {
			continue
		}
		reqs = append(reqs, podRequests(p))
	}

	if gpuResource != "" {
		if gpuAlloc, ok := alloc[gpuResource]; ok && !gpuAlloc.IsZero() {
			util := ratio(sumRequests(reqs, gpuResource), gpuAlloc)
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
		CpuUtil: ratio(sumRequests(reqs, apiv1.ResourceCPU), cpuAlloc),
		MemUtil: ratio(sumRequests(reqs, apiv1.ResourceMemory), memAlloc),
	}
	if info.CpuUtil >= info.MemUtil {
		info.Utilization, info.ResourceName = info.CpuUtil, apiv1.ResourceCPU
	} else {
		info.Utilization, info.ResourceName = info.MemUtil, apiv1.ResourceMemory
	}
	return info, nil
}

// sumRequests adds up the pods' requests of name.
func sumRequests(reqs []apiv1.ResourceList, name apiv1.ResourceName) resource.Quantity {
	var total resource.Quantity
	for _, r := range reqs {
		if q, ok := r[name]; ok {
			total.Add(q)
		}
	}
	return total
}

func ratio(used, allocatable resource.Quantity) float64 {
	return float64(used.MilliValue()) / float64(allocatable.MilliValue())
}
