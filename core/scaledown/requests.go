package scaledown

import (
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// requestsCache remembers each pod's effective cpu and memory requests, so
// the utilization pre-filter costs a map lookup per pod instead of
// re-deriving requests from the spec every loop. It is keyed by the cached
// object: an informer replaces the object on every update, so a changed pod
// is a new key.
type requestsCache struct {
	entries map[*apiv1.Pod]*requestsEntry
}

type requestsEntry struct {
	milliCPU, mem int64
	seen          bool
}

func newRequestsCache() *requestsCache {
	return &requestsCache{entries: map[*apiv1.Pod]*requestsEntry{}}
}

func (c *requestsCache) get(p *apiv1.Pod) (int64, int64) {
	e := c.entries[p]
	if e == nil {
		cpu, mem := expander.PodRequests(p)
		e = &requestsEntry{milliCPU: cpu, mem: mem}
		c.entries[p] = e
	}
	e.seen = true
	return e.milliCPU, e.mem
}

// sweep drops pods not looked at since the last sweep.
func (c *requestsCache) sweep() {
	for p, e := range c.entries {
		if !e.seen {
			delete(c.entries, p)
			continue
		}
		e.seen = false
	}
}

// utilization is the larger of the cpu and memory request ratios, counted
// as utilization.Calculate counts them (completed pods left out, DaemonSet
// pods left out when skipDaemonSets, mirror pods kept); ok is false when
// the node has no allocatable cpu or memory.
func (c *requestsCache) utilization(n *apiv1.Node, pods []*apiv1.Pod, skipDaemonSets bool) (float64, bool) {
	allocCPU := n.Status.Allocatable.Cpu().MilliValue()
	allocMem := n.Status.Allocatable.Memory().Value()
	if allocCPU <= 0 || allocMem <= 0 {
		return 0, false
	}
	var cpu, mem int64
	for _, p := range pods {
		if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		if skipDaemonSets && drain.IsDaemonSetPod(p) && !drain.IsMirrorPod(p) {
			continue
		}
		pc, pm := c.get(p)
		cpu += pc
		mem += pm
	}
	u := float64(cpu) / float64(allocCPU)
	if m := float64(mem) / float64(allocMem); m > u {
		u = m
	}
	return u, true
}
