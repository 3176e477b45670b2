package core

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/giveup"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
)

// RunOnce is one iteration at time now: observe the cluster, give up on
// nodes that will not come, check health, then scale up, or else scale
// down, then raise groups to their min size. ctx bounds the iteration's
// Kubernetes writes.
func (a *Autoscaler) RunOnce(ctx context.Context, now time.Time) (err error) {
	start := time.Now()
	a.beginIteration(now)
	defer func() { a.endIteration(now, start, err) }()
	stateKnown := false
	defer func() {
		// Status is written whatever the outcome, as upstream does, once the
		// registry has seen the cluster at least once.
		if stateKnown || a.status.written {
			a.writeStatus(ctx, now)
		}
	}()

	c, err := a.observe(now)
	if err != nil {
		return err
	}
	stateKnown = true
	groups, err := a.giveUpPhase(c, now)
	if err != nil || (len(groups) == 0 && !a.opts.NodeAutoprovisioningEnabled) {
		return err
	}
	total, healthy := a.healthCheck(now)
	if !healthy {
		return nil
	}
	sim := a.newIterationSimulation(c, groups)
	defer a.sync.end()

	scaledUp, err := a.scaleUpPhase(sim, c, groups, total, now)
	// The capacity objects' statuses follow the scale-up phase's
	// decisions, failed or not.
	a.writeCapacityStatus(ctx)
	if err != nil {
		return err
	}
	if scaledUp {
		a.acted = true
		a.noteScaleUp(now)
		a.report.ScaledUp(now)
		klog.V(1).InfoS("Scale-down skipped: this iteration scaled up")
		return nil
	}
	if sim.newPodsWait {
		// Upstream's DisableScaleDownForLoop: the room very new pods need
		// is not known yet; nothing is removed before their scale-up.
		klog.V(1).InfoS("Scale-down skipped: unschedulable pods are very new")
		a.newPodsAt = sim.newPodsAt
		a.deleteEmptyAutoprovisioned(now)
		a.minSizePhase(sim, groups, now)
		return nil
	}
	empty, drained, err := a.scaleDownPhase(ctx, scaledown.PlannerInput{
		Snapshot: sim.snapshot, PodsByNode: sim.podsByNode(), Nodes: c.nodes, PDBs: c.pdbs, BeingDeleted: sim.beingDeleted,
		Held: sim.held, Planned: a.consolidationPlanned(), Quotas: sim.quotas, Now: now, DRA: c.dra,
	})
	if err != nil {
		return err
	}
	// A workload scale-down moves is not moved again by consolidation
	// within its cooldown: whoever evicts a pod, its owner sees one
	// disruption (a scale-down drain, then a command on the node the pod
	// landed on, evicted it twice in issue 34's run).
	if a.opts.Consolidation.Enabled && len(drained) > 0 {
		placed := sim.podsByNode()
		for _, name := range drained {
			a.consolidator().Disrupted(placed[name], now)
		}
	}
	// Consolidation plans on the cluster scale-down leaves.
	if err := sim.remove(heldByScaleDown, empty, drained, c.nodes); err != nil {
		return err
	}
	a.consolidationPhase(ctx, sim, c, now)
	a.deleteEmptyAutoprovisioned(now)
	a.minSizePhase(sim, groups, now)
	return nil
}

// beginIteration records the iteration's start for the health check and
// the last_activity metric.
func (a *Autoscaler) beginIteration(now time.Time) {
	a.acted = false
	a.newPodsAt = time.Time{}
	a.report.IterationStarted(now)
}

// endIteration records its duration and its error or its success.
func (a *Autoscaler) endIteration(now, start time.Time, err error) {
	a.report.IterationEnded(now, time.Since(start), err)
}

// observe refreshes the provider, reads the caches and updates the cluster
// state registry with them.
func (a *Autoscaler) observe(now time.Time) (clusterView, error) {
	refreshStart := time.Now()
	if err := a.provider.Refresh(); err != nil {
		return clusterView{}, report.CloudProviderError(fmt.Errorf("cloud provider refresh: %w", err))
	}
	a.report.Took(metrics.CloudProviderRefresh, refreshStart)
	if pr, ok := a.provider.(cloudprovider.ProblemReporter); ok {
		a.report.Problems(pr.Problems())
	}
	c, err := a.clusterObjects()
	if err != nil {
		return clusterView{}, report.InternalError(err)
	}
	if c.limits, err = resourcequotas.NewLimits(a.opts, a.provider); err != nil {
		klog.InfoS("Resource limits incomplete", "err", err)
	}
	csStart := time.Now()
	c.dra = c.newDRA()
	a.registry.SetDevicePublishers(c.dra.HasNodeSlices)
	if err := a.updateClusterState(c, now); err != nil {
		return clusterView{}, err
	}
	a.report.Took(metrics.UpdateClusterState, csStart)
	return c, nil
}

// giveUpPhase gives up on instances that never registered or failed, and
// returns the node groups as they are after it (none: nothing to do).
// It runs before the health check: such instances count against it, and
// only this removes them, so an unhealthy verdict must not keep them
// forever.
func (a *Autoscaler) giveUpPhase(c clusterView, now time.Time) ([]clusterstate.NodeGroupState, error) {
	groups := a.registry.NodeGroups()
	if len(groups) == 0 {
		klog.InfoS("No node groups to autoscale; nothing to do", "provider", a.provider.Name())
		a.report.NothingToScale()
		return nil, nil
	}
	gaveUp, err := giveup.Run(a.registry, now)
	if err != nil {
		a.report.Error(report.CloudProviderError(err))
		klog.ErrorS(err, "Giving up on nodes failed")
	}
	if len(gaveUp) == 0 {
		return groups, nil
	}
	a.acted = true
	a.report.GiveUps(gaveUp, now)
	// Giving up on every node of a created pool may have deleted the pool
	// in their place: recorded now, before a Refresh forgets it.
	for _, g := range gaveUp {
		if g.DeleteErr == nil && g.Plan.Group.Autoprovisioned() && !g.Plan.Group.Exist() {
			a.deleteNodeGroup(g.Plan.Group, now)
		}
	}
	// The targets changed: recount upcoming nodes before scaling up.
	if err := a.updateClusterState(c, now); err != nil {
		return nil, err
	}
	return a.registry.NodeGroups(), nil
}

// updateClusterState updates the cluster state registry with the nodes and
// exports its gauges.
func (a *Autoscaler) updateClusterState(c clusterView, now time.Time) error {
	if err := a.registry.UpdateNodes(c.nodes, now); err != nil {
		return report.CloudProviderError(fmt.Errorf("updating cluster state: %w", err))
	}
	a.report.State(c.limits, now)
	return nil
}

// healthCheck says whether the cluster is healthy enough to scale, as
// upstream judges it (--ok-total-unready-count,
// --max-total-unready-percentage), and returns its node readiness.
func (a *Autoscaler) healthCheck(now time.Time) (clusterstate.Readiness, bool) {
	total := a.registry.TotalReadiness()
	if !a.registry.IsClusterHealthy() {
		klog.InfoS("Cluster unhealthy; not scaling", "unready", total.Unready, "longUnregistered", total.LongUnregistered, "registered", total.Registered,
			"okTotalUnreadyCount", a.opts.OkTotalUnreadyCount, "maxTotalUnreadyPercentage", a.opts.MaxTotalUnreadyPercentage)
		a.report.Safety(false, now)
		return total, false
	}
	a.report.Safety(true, now)
	return total, true
}

// scaleDownPhase removes unneeded nodes (unless --scale-down-enabled=false)
// and returns the empty nodes whose removal it started and the nodes it
// started draining.
func (a *Autoscaler) scaleDownPhase(ctx context.Context, in scaledown.PlannerInput) (empty, drained []string, err error) {
	if !a.opts.ScaleDownEnabled {
		klog.V(2).InfoS("Scale-down disabled", "scaleDownEnabled", false)
		a.report.ScaleDownOff()
		return nil, nil, nil
	}
	// The removals it starts report their steps to the reporter as they
	// happen; the pass's own result is recorded here.
	res, err := a.scaleDown.RunOnce(ctx, in, a.lastScaleUp)
	a.report.ScaleDown(in.Now, res, err)
	// Removals still running after this phase (drains, asynchronous deletes).
	removals, _ := a.removals.InFlight()
	a.report.PendingDeletions(removals)
	if err != nil {
		return nil, nil, report.InternalError(fmt.Errorf("scale-down: %w", err))
	}
	// A removal started is no reason for a follow-up iteration: the end of
	// each removal wakes the loop (RemovalDone), and the next unneeded node
	// to come of age wakes it at its time.
	a.nextScaleDownAt = res.NextAt
	if res.Started() {
		a.report.ScaleDownStarted(in.Now)
	}
	return res.Empty, res.Drained, nil
}

// minSizePhase, with --enforce-node-group-min-size, raises node groups whose
// target is below their min size to it, as upstream does at the end of an
// iteration that did not scale up for pending pods.
func (a *Autoscaler) minSizePhase(sim *iterationSimulation, groups []clusterstate.NodeGroupState, now time.Time) {
	if !a.opts.EnforceNodeGroupMinSize || !scaleup.AnyBelowMinSize(groups) {
		return
	}
	templates := sim.templates()
	for id, err := range templates.Errors {
		klog.ErrorS(err, "Min size: no template for the node group", "nodeGroup", id)
	}
	if done := a.scaleUp.ScaleUpToMinSize(sim.quotas, templates.ByGroup, now); len(done) > 0 {
		a.acted = true
		a.noteScaleUp(now)
		a.report.ScaledUp(now)
	}
}

// nodeNames returns a lookup of the nodes by name.
func nodeNames(nodes []*apiv1.Node) func(string) bool {
	names := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		names[n.Name] = true
	}
	return func(name string) bool { return names[name] }
}

// podsByNode groups bound pods by node name.
func podsByNode(pods []*apiv1.Pod) map[string][]*apiv1.Pod {
	out := map[string][]*apiv1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out
}

func (a *Autoscaler) writeStatus(ctx context.Context, now time.Time) {
	if !a.opts.WriteStatusConfigMap {
		return
	}
	if err := a.status.write(ctx, a.registry.GetStatus(now)); err != nil {
		a.report.Error(report.APICallError(err))
		klog.ErrorS(err, "Writing the status ConfigMap failed")
	}
}
