// Package statemetrics exports the cluster state's gauges from one place:
// nodes by readiness, node groups' sizes, health and backoff, how many
// groups there are and how many nodes the cluster may grow to. The cluster
// state registry only observes; the core calls Report after each
// UpdateNodes and ReportHealth after it backed a group off.
package statemetrics

import (
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// Reporter exports the registry's state. It remembers the groups it
// exported, to drop the series of groups that vanished.
type Reporter struct {
	maxNodesTotal int
	groups        map[string]bool
}

// NewReporter returns a Reporter; maxNodesTotal is --max-nodes-total.
func NewReporter(maxNodesTotal int) *Reporter {
	return &Reporter{maxNodesTotal: maxNodesTotal}
}

// Report exports the registry's state as the last UpdateNodes left it.
func (rep *Reporter) Report(r *clusterstate.Registry, now time.Time) {
	groups := r.NodeGroups()
	seen := make(map[string]bool, len(groups))
	maxSizes := make([]int, 0, len(groups))
	autoprovisioned := 0
	for _, gs := range groups {
		id := gs.Group.Id()
		seen[id] = true
		if gs.Group.Autoprovisioned() {
			autoprovisioned++
		}
		maxSizes = append(maxSizes, gs.Group.MaxSize())
		metrics.UpdateNodeGroupMetrics(id, gs.Group.MinSize(), gs.Group.MaxSize(), gs.Target)
	}
	for id := range rep.groups {
		if !seen[id] {
			metrics.DeleteNodeGroupMetrics(id)
		}
	}
	rep.groups = seen
	ReportHealth(r, now)
	total := r.TotalReadiness()
	metrics.UpdateNodesCount(total.Ready, total.Unready, total.NotStarted, total.LongUnregistered, total.Unregistered)
	metrics.UpdateNodeGroupsCount(len(groups)-autoprovisioned, autoprovisioned)
	metrics.UpdateMaxNodesCount(maxNodes(maxSizes, rep.maxNodesTotal))
}

// ReportHealth exports each group's health and backoff
// (--emit-per-nodegroup-metrics).
func ReportHealth(r *clusterstate.Registry, now time.Time) {
	for _, gs := range r.NodeGroups() {
		id := gs.Group.Id()
		off, info, _ := r.BackedOff(id, now)
		metrics.UpdateNodeGroupHealth(id, gs.Healthy, off, info.ErrorCode)
	}
}

// maxNodes is how many nodes the cluster may grow to: the groups' maxima,
// bounded by --max-nodes-total when set.
func maxNodes(groupMax []int, maxNodesTotal int) int {
	n := 0
	for _, m := range groupMax {
		n += m
	}
	if maxNodesTotal > 0 && n > maxNodesTotal {
		n = maxNodesTotal
	}
	return n
}
