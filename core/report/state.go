package report

import (
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
)

// groupSeries are the node groups whose per-group series were exported
// last, so that those of groups that vanished are dropped.
type groupSeries struct{ ids map[string]bool }

// State exports the registry's state as the last UpdateNodes left it:
// nodes by readiness, each group's sizes, health and backoff, how many
// groups there are and how many nodes the cluster may grow to (the groups'
// maxima within the limits).
func (r *Reporter) State(limits resourcequotas.Limits, now time.Time) {
	groups := r.registry.NodeGroups()
	seen := make(map[string]bool, len(groups))
	maxima, autoprovisioned := 0, 0
	for _, gs := range groups {
		id := gs.Group.Id()
		seen[id] = true
		if gs.Group.Autoprovisioned() {
			autoprovisioned++
		}
		maxima += gs.Group.MaxSize()
		metrics.UpdateNodeGroupMetrics(id, gs.Group.MinSize(), gs.Group.MaxSize(), gs.Target)
	}
	for id := range r.series.ids {
		if !seen[id] {
			metrics.DeleteNodeGroupMetrics(id)
		}
	}
	r.series.ids = seen
	r.groupHealth(now)
	total := r.registry.TotalReadiness()
	metrics.UpdateNodesCount(total.Ready, total.Unready, total.NotStarted, total.LongUnregistered, total.Unregistered)
	metrics.UpdateNodeGroupsCount(len(groups)-autoprovisioned, autoprovisioned)
	metrics.UpdateMaxNodesCount(limits.ClusterMaxNodes(maxima))
}

// groupHealth exports each group's health and backoff
// (--emit-per-nodegroup-metrics). Every case that backs a group off calls
// it, so the series never wait for the next loop.
func (r *Reporter) groupHealth(now time.Time) {
	for _, gs := range r.registry.NodeGroups() {
		id := gs.Group.Id()
		off, info, _ := r.registry.BackedOff(id, now)
		metrics.UpdateNodeGroupHealth(id, gs.Healthy, off, info.ErrorCode)
	}
}

// Usage exports the live nodes' cores and memory and the cluster-wide
// limits on them.
func (r *Reporter) Usage(t resourcequotas.Tracker) {
	live, limits := t.Live(), t.Limits()
	metrics.UpdateClusterCPUCurrentCores(live.MilliCPU / 1000)
	metrics.UpdateClusterMemoryCurrentBytes(live.Memory)
	metrics.UpdateCPULimitsCores(limits.MinMilliCPU/1000, limits.MaxMilliCPU/1000)
	metrics.UpdateMemoryLimitsBytes(limits.MinMemory, limits.MaxMemory)
}
