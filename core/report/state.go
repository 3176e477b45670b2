package report

import (
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
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
	r.spend(limits)
	r.dropletQuota(limits, now)
}

// Values of the status ConfigMap's limits.dropletQuota.status.
const (
	DropletQuotaAvailable = "Available"
	DropletQuotaReached   = "Reached"
)

// dropletQuota shows the account's droplet limit in the status ConfigMap
// and, when no droplet is left, records a DropletQuotaReached event on it
// (once each time it is reached): the loop that reads the quota at its
// limit says so. Unknown (no droplet:read): no section.
func (r *Reporter) dropletQuota(limits resourcequotas.Limits, now time.Time) {
	st := r.limitsStatus
	q := limits.Instances
	if q == nil {
		st.DropletQuota = nil
		r.setLimitsStatus(st)
		return
	}
	status := DropletQuotaAvailable
	if q.Headroom <= 0 {
		status = DropletQuotaReached
	}
	since := now
	if prev := st.DropletQuota; prev != nil && prev.Status == status {
		since, _ = time.Parse(time.RFC3339, prev.LastTransitionTime)
	} else if status == DropletQuotaReached {
		r.events.Eventf(r.status, apiv1.EventTypeWarning, "DropletQuotaReached",
			"The account has %d droplets of its droplet limit %d: no node is added until droplets are deleted or DigitalOcean raises the limit", q.Instances, q.Limit)
	}
	st.DropletQuota = &api.DropletQuotaStatus{Status: status, Limit: q.Limit, Droplets: q.Instances,
		ReadAt: q.ReadAt.UTC().Format(time.RFC3339), LastTransitionTime: since.UTC().Format(time.RFC3339)}
	r.setLimitsStatus(st)
}

// spend exports what the autoscaled groups cost an hour (each group's
// target times its size's price) and the money limit, as metrics and in
// the status ConfigMap's limits section.
func (r *Reporter) spend(limits resourcequotas.Limits) {
	st := r.limitsStatus
	if limits.Money == nil {
		metrics.UpdateHourlyCost(0, 0, nil)
		st.HourlyCost, st.MaxHourlyCost, st.Unpriced = "", "", nil
		r.setLimitsStatus(st)
		return
	}
	perGroup := map[string]float64{}
	total := 0.0
	st.Unpriced = nil
	for _, gs := range r.registry.NodeGroups() {
		id := gs.Group.Id()
		ni, err := gs.Group.TemplateNodeInfo()
		if err != nil || ni == nil {
			if gs.Target > 0 {
				st.Unpriced = append(st.Unpriced, id)
			}
			continue
		}
		price, err := limits.Money.HourlyPrice(ni.Node())
		if err != nil {
			if gs.Target > 0 {
				st.Unpriced = append(st.Unpriced, id)
			}
			continue
		}
		perGroup[id] = price * float64(gs.Target)
		total += perGroup[id]
	}
	metrics.UpdateHourlyCost(total, limits.Money.MaxHourly, perGroup)
	st.HourlyCost = fmt.Sprintf("%.4f", total)
	st.MaxHourlyCost = ""
	if limits.Money.MaxHourly > 0 {
		st.MaxHourlyCost = fmt.Sprintf("%.4f", limits.Money.MaxHourly)
	}
	r.setLimitsStatus(st)
}

// setLimitsStatus hands the limits section to the registry: none when it
// says nothing.
func (r *Reporter) setLimitsStatus(st api.LimitsStatus) {
	r.limitsStatus = st
	if st.HourlyCost == "" && st.MaxHourlyCost == "" && st.DropletQuota == nil {
		r.registry.SetLimits(nil)
		return
	}
	r.registry.SetLimits(&st)
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
