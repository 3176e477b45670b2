package core

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
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
	empty, drained, err := a.scaleDownPhase(ctx, scaledown.PlannerInput{
		Snapshot: sim.snapshot, PodsByNode: podsByNode(sim.placed), Nodes: c.nodes, PDBs: c.pdbs, BeingDeleted: sim.beingDeleted,
		Held: sim.held, Quotas: sim.quotas, Now: now, DRA: c.dra,
	})
	if err != nil {
		return err
	}
	// Consolidation plans on the cluster scale-down leaves.
	sim.drains += len(drained)
	if err := sim.remove(heldByScaleDown, append(empty, drained...), c.nodes); err != nil {
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
	gaveUp, err := fixNodeGroupSizes(a.registry, now)
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

// iterationSimulation is the simulated cluster of one iteration: real nodes
// except those being removed (their capacity is going away), and their pods
// except expendable ones, which neither keep a node nor take room a
// pending pod could preempt. The snapshot (every pod through the scheduler
// framework's bookkeeping) is the costliest part of an iteration; it is
// built on first use, only when pending pods or scale-down candidates need
// a simulation.
//
// It is the one view the loop's phases share: what a phase removes is
// taken out of it (remove) before the next phase plans, and the nodes a
// phase holds are listed in held, so no node is acted on by two phases
// in one loop.
type iterationSimulation struct {
	beingDeleted map[string]bool
	// held: node name to the phase that acted on it this loop or holds it
	// (a consolidation command in flight).
	held     map[string]string
	placed   []*apiv1.Pod
	snapshot func() (*simulator.ClusterSnapshot, error)
	// built: the snapshot was built (its iteration layer is in use).
	built bool
	// drains counts the drains a phase started in this iteration: their
	// pods need room no later plan sees (their nodes left the snapshot).
	drains int
	// templates returns every node group's template, built once per
	// iteration on first use and shared by the phases.
	templates func() scaleup.Templates
	// quotas counts the live nodes against the cluster-wide limits. What
	// a phase started removing stays counted against the maxima (its
	// removal may still fail); afterRemovals counts it gone, for the
	// minima.
	quotas, afterRemovals resourcequotas.Tracker
}

// The phases that hold nodes, as iterationSimulation.held names them.
const (
	heldByScaleDown     = "scale-down"
	heldByConsolidation = "a consolidation command in flight"
)

func (a *Autoscaler) newIterationSimulation(c clusterView, groups []clusterstate.NodeGroupState) *iterationSimulation {
	sim := &iterationSimulation{
		beingDeleted: a.removals.BeingDeleted(),
		held:         map[string]string{},
		placed:       drain.WithoutExpendable(c.pods, a.opts.ExpendablePodsPriorityCutoff),
	}
	if a.consolidation != nil {
		for _, n := range a.consolidation.Held(c.nodes, a.registry.NodeGroupIDForNode) {
			sim.held[n] = heldByConsolidation
		}
	}
	var templates *scaleup.Templates
	sim.templates = func() scaleup.Templates {
		if templates == nil {
			t := scaleup.BuildTemplates(a.provider, groups, c.nodes, a.registry.NodeGroupIDForNode, c.dss, a.checker, a.taints, c.dra.NodeSlices)
			a.report.Templates(t)
			templates = &t
		}
		return *templates
	}
	sim.quotas = resourcequotas.NewTracker(c.limits, c.nodes, sim.beingDeleted)
	sim.afterRemovals = sim.quotas
	a.report.Usage(sim.quotas)
	sim.snapshot = func() (*simulator.ClusterSnapshot, error) {
		if !sim.built {
			live := resourcequotas.LiveNodes(c.nodes, sim.beingDeleted)
			if err := a.sync.begin(live, sim.placed, c.newDRA()); err != nil {
				a.sync.invalidate()
				return nil, report.InternalError(fmt.Errorf("building cluster snapshot: %w", err))
			}
			sim.built = true
		}
		return a.snapshot, nil
	}
	return sim
}

// remove records that phase started removing the named nodes: the later
// phases neither count them against the minima nor place pods on them,
// and none acts on them.
func (sim *iterationSimulation) remove(phase string, names []string, nodes []*apiv1.Node) error {
	if len(names) == 0 {
		return nil
	}
	sim.beingDeleted = maps.Clone(sim.beingDeleted)
	if sim.beingDeleted == nil {
		sim.beingDeleted = map[string]bool{}
	}
	gone := make(map[string]bool, len(names))
	for _, name := range names {
		sim.held[name] = phase
		gone[name] = true
	}
	for _, n := range nodes {
		if gone[n.Name] && !sim.beingDeleted[n.Name] {
			sim.afterRemovals.Remove(n)
			sim.beingDeleted[n.Name] = true
		}
	}
	if !sim.built {
		return nil // built later without them
	}
	snap, err := sim.snapshot()
	if err != nil {
		return err
	}
	for name := range gone {
		if snap.HasNode(name) {
			if err := snap.RemoveNode(name); err != nil {
				return report.InternalError(fmt.Errorf("taking node %s out of the snapshot: %w", name, err))
			}
		}
	}
	return nil
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

// scaleUpPhase scales up for the pending pods that fit neither existing nor
// upcoming nodes. Pods that fit existing nodes stay placed in the snapshot
// (the scheduler will bind them there), so scale-down sees that load too;
// so do the pods being evicted from nodes under drain.
func (a *Autoscaler) scaleUpPhase(sim *iterationSimulation, c clusterView, groups []clusterstate.NodeGroupState,
	total clusterstate.Readiness, now time.Time) (bool, error) {
	snapshot := sim.snapshot
	pending := scaleup.FilterPendingPods(c.pods, a.opts, now, nodeNames(c.nodes))
	a.report.PendingPods(len(pending.Eligible)+pending.TooYoung+len(pending.Nominated), pending.SchedulerUnprocessed)
	if len(pending.Nominated) > 0 {
		if err := a.placeNominated(snapshot, pending.Nominated); err != nil {
			return false, err
		}
	}
	draining := a.removals.Draining()
	drained := scaleup.DrainedPods(c.pods, draining, a.opts.ExpendablePodsPriorityCutoff)
	if len(drained) > 0 {
		klog.V(1).InfoS("Scale-up: pods being evicted from nodes under drain are placed as pending pods", "pods", len(drained), "nodes", len(draining))
	}
	toPlace := append(slices.Clip(pending.Eligible), drained...)
	// Processors add their fake pods after the real ones (which are placed
	// first) and after the metrics above, which count real pods only.
	toPlace, err := a.capacity.processors.Process(&fakepods.Context{Now: now}, toPlace)
	if err != nil {
		return false, report.InternalError(fmt.Errorf("pod list processors: %w", err))
	}
	checkCapacity, atomic := a.requestsDue()
	if len(toPlace) == 0 && !checkCapacity && !atomic {
		if pending.TooYoung > 0 || pending.Expendable > 0 {
			klog.V(1).InfoS("Scale-up: no unschedulable pods old enough to act on", "youngerThanDelay", pending.TooYoung, "expendable", pending.Expendable)
		} else {
			klog.V(1).InfoS("Scale-up: no unschedulable pods")
		}
		return false, nil
	}

	filterStart := time.Now()
	stillPending, err := a.fitExistingNodes(snapshot, toPlace)
	if err != nil {
		a.report.Took(metrics.FilterOutSchedulable, filterStart)
		return false, err
	}
	if checkCapacity {
		// On the cluster as it is, after bookings and pending pods.
		a.capacity.requests.CheckCapacity(&requestSimulation{a: a, snap: a.snapshot}, now)
	}
	if len(stillPending) == 0 && !atomic {
		a.report.Took(metrics.FilterOutSchedulable, filterStart)
		return false, nil
	}
	built := sim.templates()
	templates, templateErrs := built.ByGroup, built.Errors
	// Upcoming nodes are simulated only for this phase.
	a.snapshot.Fork()
	defer a.snapshot.Revert()
	stillPending, err = a.fitUpcomingNodes(groups, templates, stillPending)
	a.report.Took(metrics.FilterOutSchedulable, filterStart)
	if err != nil {
		return false, err
	}
	// Bookings hold the room they find; they never ask for more.
	stillPending, holding := fakepods.WithoutHoldsRoomOnly(stillPending)
	if holding > 0 {
		klog.V(1).InfoS("Scale-up: booked fake pods fit no existing or upcoming node; they cause no scale-up", "pods", holding)
	}
	if atomic {
		rs := &requestSimulation{a: a, snap: a.snapshot, quotas: sim.quotas, templates: templates, templateErrs: templateErrs, readyNodes: total.Ready, now: now}
		scaled, err := a.capacity.requests.ScaleUpAtomic(rs, now)
		if err != nil {
			a.report.Error(report.InternalError(err))
			klog.ErrorS(err, "Scale-up: best-effort-atomic ProvisioningRequest")
		}
		if scaled {
			// Other pending pods get their turn next iteration, as upstream
			// alternates request and pod scale-ups.
			return true, nil
		}
	}
	if len(stillPending) == 0 {
		return false, nil
	}
	if !a.opts.ScaleUpFromZero && total.Ready == 0 {
		klog.InfoS("Scale-up: pending pods but the cluster has no ready node and scale-up from zero is off", "pods", len(stillPending))
		return false, nil
	}
	res, err := a.scaleUp.ScaleUp(scaleup.Input{
		Snapshot: a.snapshot, Pods: stillPending, Quotas: sim.quotas, Templates: templates, TemplateErrors: templateErrs,
		DaemonSets: c.dss, Now: now,
	})
	if err != nil {
		return false, report.InternalError(fmt.Errorf("scale-up: %w", err))
	}
	return res.ScaledUp(), nil
}

// fitExistingNodes places the pods that fit existing nodes in the snapshot,
// where they stay, and returns the others.
func (a *Autoscaler) fitExistingNodes(snapshot func() (*simulator.ClusterSnapshot, error), pods []*apiv1.Pod) ([]*apiv1.Pod, error) {
	snap, err := snapshot()
	if err != nil {
		return nil, err
	}
	// A pod whose claim the resourceclaim controller has not created yet
	// gets the claim it will create (in this iteration's layer only).
	pods = snap.DRA().WithTemplateClaims(pods, a.claimTemplate)
	_, stillPending, err := simulator.TrySchedulePods(a.checker, snap, pods)
	if err != nil {
		return nil, report.InternalError(fmt.Errorf("filtering schedulable pods: %w", err))
	}
	if fit := len(pods) - len(stillPending); fit > 0 {
		klog.InfoS("Scale-up: pending pods fit existing nodes (the scheduler has not placed them yet)", "pods", fit)
	}
	return stillPending, nil
}

// fitUpcomingNodes adds the nodes asked for and not yet registered to the
// snapshot, places the pods that fit them, and returns the others: those
// need new nodes.
func (a *Autoscaler) fitUpcomingNodes(groups []clusterstate.NodeGroupState, templates map[string]*framework.NodeInfo, pods []*apiv1.Pod) ([]*apiv1.Pod, error) {
	added, names, err := scaleup.AddUpcomingNodes(a.snapshot, groups, templates)
	if err != nil {
		return nil, report.InternalError(err)
	}
	upcoming := 0
	for _, n := range added {
		upcoming += n
	}
	if upcoming == 0 {
		return pods, nil
	}
	// pods fit no existing node: most need try only the upcoming ones.
	_, stillPending, err := simulator.TrySchedulePodsOnNew(a.checker, a.snapshot, pods, names)
	if err != nil {
		return nil, report.InternalError(fmt.Errorf("filtering pods for upcoming nodes: %w", err))
	}
	if fit := len(pods) - len(stillPending); fit > 0 {
		klog.InfoS("Scale-up: pending pods will fit on upcoming nodes; no new request for them", "pods", fit, "upcomingNodes", upcoming, "byNodeGroup", added)
	}
	return stillPending, nil
}

// placeNominated puts pods waiting for preemption on their nominated nodes in
// the snapshot, as upstream does: whether they fit there or not, the
// scheduler will make room for them by preemption, and the rest of the
// iteration (pending pods, scale-down) must see that room as taken.
func (a *Autoscaler) placeNominated(snapshot func() (*simulator.ClusterSnapshot, error), pods []*apiv1.Pod) error {
	snap, err := snapshot()
	if err != nil {
		return err
	}
	for _, p := range pods {
		node := p.Status.NominatedNodeName
		if !snap.HasNode(node) {
			// Being removed: not in the snapshot, and no room to take.
			continue
		}
		if err := snap.AddEquivalentPod(p, nil, node); err != nil {
			return report.InternalError(fmt.Errorf("placing pod %s/%s on its nominated node %s: %w", p.Namespace, p.Name, node, err))
		}
	}
	klog.V(1).InfoS("Scale-up: pending pods wait for preemption on their nominated nodes; no scale-up for them", "pods", len(pods))
	return nil
}

// claimTemplate reads a ResourceClaimTemplate from the cache.
func (a *Autoscaler) claimTemplate(namespace, name string) (*resourceapi.ResourceClaimTemplate, error) {
	return a.cache.claimTemplates.ResourceClaimTemplates(namespace).Get(name)
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
