package planner

import (
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

// unremovableNodes records why each node cannot be removed in the current
// loop: it feeds unremovable_nodes_count{reason} and logs a node's reason
// only when it differs from the previous loop's.
type unremovableNodes struct {
	current map[string]unremovableNote
	last    map[string]unremovableNote
}

type unremovableNote struct {
	reason simulator.UnremovableReason
	detail string
}

func newUnremovableNodes() *unremovableNodes {
	return &unremovableNodes{current: map[string]unremovableNote{}}
}

// begin starts a loop: the reasons found so far become the previous loop's,
// and the loop before's map, emptied, takes this loop's (a map of every
// node, not grown again each loop).
func (u *unremovableNodes) begin() {
	u.last, u.current = u.current, u.last
	if u.current == nil {
		u.current = map[string]unremovableNote{}
	}
	clear(u.current)
}

// add records and logs why node stays.
func (u *unremovableNodes) add(node string, reason simulator.UnremovableReason, detail string) {
	note := unremovableNote{reason: reason, detail: detail}
	if u.last[node] != note {
		klog.V(2).InfoS("Scale-down: node not removable", "node", klog.KRef("", node), "why", detail)
	} else {
		klog.V(5).InfoS("Scale-down: node not removable", "node", klog.KRef("", node), "why", detail)
	}
	u.current[node] = note
}

// record notes why an unneeded node is not removed now, without a log line
// (the caller logs its own).
func (u *unremovableNodes) record(node string, reason simulator.UnremovableReason) {
	u.current[node] = unremovableNote{reason: reason}
}

// countsByLabel counts this loop's unremovable nodes by the metric's reason
// label.
func (u *unremovableNodes) countsByLabel() map[string]int {
	out := map[string]int{}
	for _, n := range u.current {
		out[n.reason.Label()]++
	}
	return out
}
