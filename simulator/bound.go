package simulator

import (
	apiv1 "k8s.io/api/core/v1"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// PlacementBound is the most of pods that the nodes not in exclude could
// hold, from their free cpu, memory and pod slots alone: a node with f free
// holds at most f ÷ (the smallest request) of them, per resource. More
// pods than the bound proves that no placement exists; a count within it
// proves nothing (the scheduler's other filters, fragmentation), so it is
// a test to run before a removal simulation, never in its place. On a full
// cluster each pod of a simulation that cannot succeed tries every node
// (Filter on each); the bound costs one pass over the nodes.
func (s *ClusterSnapshot) PlacementBound(pods []*apiv1.Pod, exclude map[string]bool) int {
	if len(pods) == 0 {
		return 0
	}
	var minCPU, minMem int64 = -1, -1
	for _, p := range pods {
		r := framework.PodRequests(p)
		cpu, mem := r.Cpu().MilliValue(), r.Memory().Value()
		if minCPU < 0 || cpu < minCPU {
			minCPU = cpu
		}
		if minMem < 0 || mem < minMem {
			minMem = mem
		}
	}
	var byCPU, byMem, bySlots int64
	add := func(info *schedframework.NodeInfo, sign int64) {
		alloc, used := info.Allocatable, info.Requested
		bySlots += sign * max(0, int64(alloc.AllowedPodNumber-len(info.Pods)))
		if minCPU > 0 {
			byCPU += sign * (max(0, alloc.MilliCPU-used.MilliCPU) / minCPU)
		}
		if minMem > 0 {
			byMem += sign * (max(0, alloc.Memory-used.Memory) / minMem)
		}
	}
	// Every node, then the excluded ones taken out: a few lookups rather
	// than one per node.
	for _, info := range s.nodeList() {
		add(info.(*schedframework.NodeInfo), 1)
	}
	for name := range exclude {
		if info, ok := s.nodes[name]; ok {
			add(info, -1)
		}
	}
	bound := bySlots
	if minCPU > 0 {
		bound = min(bound, byCPU)
	}
	if minMem > 0 {
		bound = min(bound, byMem)
	}
	return int(min(bound, int64(len(pods))))
}
