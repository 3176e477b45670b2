package utilization

import (
	apiv1 "k8s.io/api/core/v1"
)

// RequestsCache remembers each pod's cpu and memory requests (RequestsOf
// without a GPU resource), so that a phase reading every pod every loop
// (scale-down's utilization pre-filter, consolidation's trend of the
// cluster's requests) costs a map lookup per pod instead of deriving the
// requests from the spec again. It is keyed by the cached object: an
// informer replaces the object on every update, so a changed pod is a new
// key. Not safe for concurrent use.
type RequestsCache struct {
	entries map[*apiv1.Pod]*requestsEntry
}

type requestsEntry struct {
	requests Requests
	seen     bool
}

// NewRequestsCache returns an empty cache.
func NewRequestsCache() *RequestsCache {
	return &RequestsCache{entries: map[*apiv1.Pod]*requestsEntry{}}
}

// Get answers as RequestsOf(p, ""), from the cache when it can.
func (c *RequestsCache) Get(p *apiv1.Pod) *Requests {
	e := c.entries[p]
	if e == nil {
		e = &requestsEntry{requests: RequestsOf(p, "")}
		c.entries[p] = e
	}
	e.seen = true
	return &e.requests
}

// Sweep drops pods not looked at since the last sweep: once a loop, so
// that pods gone (or replaced by a newer object) do not stay.
func (c *RequestsCache) Sweep() {
	for p, e := range c.entries {
		if !e.seen {
			delete(c.entries, p)
			continue
		}
		e.seen = false
	}
}

// Len is how many pods the cache holds.
func (c *RequestsCache) Len() int { return len(c.entries) }
