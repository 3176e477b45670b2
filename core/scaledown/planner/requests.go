package planner

import (
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// requestsCache remembers each pod's cpu and memory requests (as
// utilization counts them), so the utilization pre-filter costs a map lookup
// per pod instead of re-deriving requests from the spec every loop. It is
// keyed by the cached object: an informer replaces the object on every
// update, so a changed pod is a new key.
type requestsCache struct {
	entries map[*apiv1.Pod]*requestsEntry
}

type requestsEntry struct {
	requests utilization.Requests
	seen     bool
}

func newRequestsCache() *requestsCache {
	return &requestsCache{entries: map[*apiv1.Pod]*requestsEntry{}}
}

// get answers as utilization.RequestsOf(p, ""), from the cache when it can.
func (c *requestsCache) get(p *apiv1.Pod) *utilization.Requests {
	e := c.entries[p]
	if e == nil {
		e = &requestsEntry{requests: utilization.RequestsOf(p, "")}
		c.entries[p] = e
	}
	e.seen = true
	return &e.requests
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

// utilization is the node's utilization.Calculate answer without a GPU
// resource, with the pods' requests from the cache.
func (c *requestsCache) utilization(n *apiv1.Node, pods []*apiv1.Pod, skipDaemonSets bool) (utilization.Info, error) {
	return utilization.CalculateWith(n, pods, skipDaemonSets, "", c.get)
}
