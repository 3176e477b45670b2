// Package deletiontracker owns the state of node removals: which started,
// which are still running (and which of those drain their node), and how
// each ended. The actuator reports to it; the planner, scale-up and the
// removal budgets read it; listeners hear each end, which is how the
// scale-down cooldowns and the loop's wake-up are fed.
package deletiontracker

import (
	"maps"
	"sync"
)

// Outcome is how a removal ended.
type Outcome int

const (
	// Deleted: the provider deleted the node (or started to).
	Deleted Outcome = iota
	// Failed: the removal failed; the node was given back.
	Failed
	// Kept: the removal stopped without failing (a pod arrived on a node
	// that was empty when planned); the node was given back.
	Kept
)

func (o Outcome) String() string {
	switch o {
	case Deleted:
		return "deleted"
	case Failed:
		return "failed"
	}
	return "kept"
}

// Listener hears the end of every removal. It is called from the removal's
// goroutine, outside the tracker's lock.
type Listener func(node, groupID string, outcome Outcome)

// Tracker is safe for concurrent use: removals end in their own goroutines.
type Tracker struct {
	mu        sync.Mutex
	deleting  map[string]string // node → group id
	draining  map[string]bool   // the nodes of deleting that are drained
	listeners []Listener
}

// New returns a tracker that tells listeners of each removal's end.
func New(listeners ...Listener) *Tracker {
	return &Tracker{deleting: map[string]string{}, draining: map[string]bool{}, listeners: listeners}
}

// AddListener adds a listener for removals that end from now on.
func (t *Tracker) AddListener(l Listener) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.listeners = append(t.listeners, l)
}

// Started records the start of a node's removal; drain says whether its
// pods are evicted first.
func (t *Tracker) Started(node, groupID string, drain bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleting[node] = groupID
	if drain {
		t.draining[node] = true
	}
}

// Ended records the end of a node's removal and tells the listeners.
func (t *Tracker) Ended(node string, outcome Outcome) {
	t.mu.Lock()
	groupID := t.deleting[node]
	delete(t.deleting, node)
	delete(t.draining, node)
	listeners := t.listeners
	t.mu.Unlock()
	for _, l := range listeners {
		l(node, groupID, outcome)
	}
}

// BeingDeleted returns the nodes being removed.
func (t *Tracker) BeingDeleted() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(t.deleting))
	for n := range t.deleting {
		out[n] = true
	}
	return out
}

// DeletingInGroup counts the group's nodes being removed.
func (t *Tracker) DeletingInGroup(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, g := range t.deleting {
		if g == id {
			n++
		}
	}
	return n
}

// InFlight counts the removals started and not yet ended, and how many of
// them drain their node.
func (t *Tracker) InFlight() (removals, drains int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.deleting), len(t.draining)
}

// Draining returns the nodes being drained: their pods are being evicted
// and will need room elsewhere.
func (t *Tracker) Draining() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.draining)
}
