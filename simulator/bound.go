package simulator

import (
	apiv1 "k8s.io/api/core/v1"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// PlacementBound is the most of pods that the nodes not in exclude, and
// the extra nodes (not in the snapshot: a replacement to be added), could
// hold, from their free cpu, memory and pod slots alone: a node with f
// free holds at most f ÷ (the smallest request) of them, per resource.
// More pods than the bound proves that no placement exists; a count
// within it proves nothing (the scheduler's other filters,
// fragmentation), so it is a test to run before a removal simulation,
// never in its place. On a full cluster each pod of a simulation that
// cannot succeed tries every node (Filter on each); the bound costs a
// lookup per excluded node once the snapshot's sum is known.
func (s *ClusterSnapshot) PlacementBound(pods []*apiv1.Pod, exclude map[string]bool, extra ...*framework.NodeInfo) int {
	if len(pods) == 0 {
		return 0
	}
	var unit room
	unit.cpu, unit.mem = -1, -1
	for _, p := range pods {
		cpu, mem := s.podRequests(p)
		if unit.cpu < 0 || cpu < unit.cpu {
			unit.cpu = cpu
		}
		if unit.mem < 0 || mem < unit.mem {
			unit.mem = mem
		}
	}
	total := s.boundSum(unit)
	for name := range exclude {
		if info, ok := s.nodes[name]; ok {
			total = total.minus(holds(info, unit))
		}
	}
	for _, ni := range extra {
		total = total.plus(holds(schedulerNodeInfo(ni), unit))
	}
	bound := total.slots
	if unit.cpu > 0 {
		bound = min(bound, total.cpu)
	}
	if unit.mem > 0 {
		bound = min(bound, total.mem)
	}
	return int(min(bound, int64(len(pods))))
}

// podRequests is p's cpu and memory requests as the scheduler's
// NodeResourcesFit counts them: from its PodInfo on its node when the
// snapshot has it there (computed once, when it was added), else from its
// spec.
func (s *ClusterSnapshot) podRequests(p *apiv1.Pod) (milliCPU, memory int64) {
	if info, ok := s.nodes[p.Spec.NodeName]; ok {
		for _, pi := range info.Pods {
			if pi.GetPod() == p {
				r := pi.CalculateResource().Resource
				return r.GetMilliCPU(), r.GetMemory()
			}
		}
	}
	r := framework.PodRequests(p)
	return r.Cpu().MilliValue(), r.Memory().Value()
}

// room counts pods by what bounds them: by free cpu, free memory and free
// pod slots. As a unit it is the smallest request of the pods counted.
type room struct{ cpu, mem, slots int64 }

func (a room) plus(b room) room  { return room{a.cpu + b.cpu, a.mem + b.mem, a.slots + b.slots} }
func (a room) minus(b room) room { return room{a.cpu - b.cpu, a.mem - b.mem, a.slots - b.slots} }

// holds is how many pods of the unit's requests info has free room for,
// by each resource alone, as the scheduler's NodeResourcesFit counts it: a
// request at most allocatable less requested, and at most the node's
// allowed pods (a zero request is not checked, so it bounds nothing).
func holds(info *schedframework.NodeInfo, unit room) room {
	alloc, used := info.Allocatable, info.Requested
	r := room{slots: max(0, int64(alloc.AllowedPodNumber-len(info.Pods)))}
	if unit.cpu > 0 {
		r.cpu = max(0, alloc.MilliCPU-used.MilliCPU) / unit.cpu
	}
	if unit.mem > 0 {
		r.mem = max(0, alloc.Memory-used.Memory) / unit.mem
	}
	return r
}

// boundSum is holds summed over every node, kept while the snapshot's
// content (its version) and the unit stay the same: a planner bounds many
// commands of similar pods on one snapshot, each excluding a few nodes,
// and one pass over 5,000 nodes per command was most of consolidation's
// planning on a full cluster.
func (s *ClusterSnapshot) boundSum(unit room) room {
	for _, m := range s.boundMemo {
		if m.version == s.version && m.unit == unit {
			return m.sum
		}
	}
	var sum room
	for _, info := range s.nodeList() {
		sum = sum.plus(holds(info.(*schedframework.NodeInfo), unit))
	}
	// A few units per version (the pods of a loop's commands differ in
	// size); the oldest entry goes.
	if len(s.boundMemo) == maxBoundMemo {
		copy(s.boundMemo, s.boundMemo[1:])
		s.boundMemo = s.boundMemo[:maxBoundMemo-1]
	}
	s.boundMemo = append(s.boundMemo, boundMemo{version: s.version, unit: unit, sum: sum})
	return sum
}

// maxBoundMemo bounds the sums boundSum keeps.
const maxBoundMemo = 8

type boundMemo struct {
	version uint64
	unit    room
	sum     room
}
