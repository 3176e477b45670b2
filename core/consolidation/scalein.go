package consolidation

import (
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// awaitScaleIn says why cmd, held for its window and ready to act, waits
// for the cluster's own scale-in ("" when it acts now).
//
// With --pod-deletion-cost-on-unneeded-nodes, the ReplicaSet pods a held
// command would evict carry a deletion cost below the default
// (PlannedPods), so a Deployment scaling in deletes them before its other
// pods, and the command's nodes may empty without an eviction. That
// happens only while the cluster's requests fall; on the compressed day
// most of consolidation's evictions came in the evening's fall, from
// nodes the falling load was emptying anyway.
//
// Waiting forgoes the saving, and nobody knows whether the next scale-in
// will come. The command waits until the saving forgone since it was ready
// reaches the cost of the evictions the wait could avoid (its ReplicaSet
// pods'), then acts: the rule of renting skis until the rent paid equals
// the price of buying them. Whatever the load does, the wait costs at most
// what the disruption it tries to avoid would, so waiting and acting
// together cost at most twice the better of the two.
func (ph *Phase) awaitScaleIn(cmd *Command, readyAt, now time.Time) string {
	if !ph.opts.AwaitScaleIn || cmd.Appraisal.Evictions == 0 || !ph.trend.Falling(ph.trendWindow()) {
		return ""
	}
	scaleIn := 0
	for _, c := range cmd.Remove {
		for _, p := range c.Moving {
			if scaledown.ScalesInByDeletionCost(p) {
				scaleIn++
			}
		}
	}
	if scaleIn == 0 {
		return ""
	}
	avoidable := cmd.Appraisal.Disruption * float64(scaleIn) / float64(cmd.Appraisal.Evictions)
	forgone := cmd.Saving * now.Sub(readyAt).Hours()
	if forgone >= avoidable {
		return ""
	}
	return fmt.Sprintf("the requests fall and %d of its %d pod(s) to evict may be deleted by their ReplicaSets first: it waits until the saving forgone ($%.4f) reaches what their evictions cost ($%.4f)",
		scaleIn, cmd.Appraisal.Evictions, forgone, avoidable)
}

// PlannedPods returns, by node, the pods the command held (for its
// stabilization window or for the scale-in) would evict, when the scale-in
// is awaited (nil otherwise): scale-down keeps the deletion cost of
// --pod-deletion-cost-on-unneeded-nodes on them as on the pods of its own
// unneeded nodes. It is the last iteration's command; the next plan may
// drop it, and its pods' cost is then taken off.
func (ph *Phase) PlannedPods() map[string][]*apiv1.Pod {
	if !ph.opts.AwaitScaleIn || ph.planned == nil {
		return nil
	}
	out := make(map[string][]*apiv1.Pod, len(ph.planned.Remove))
	for _, c := range ph.planned.Remove {
		out[c.Node.Name] = c.Moving
	}
	return out
}
