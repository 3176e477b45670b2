package core

import (
	"fmt"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/pending"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// scaleUpPhase scales up for the pending pods that fit neither existing nor
// upcoming nodes. Pods that fit existing nodes stay placed in the snapshot
// (the scheduler will bind them there), so scale-down sees that load too;
// so do the pods being evicted from nodes under drain.
func (a *Autoscaler) scaleUpPhase(sim *iterationSimulation, c clusterView, groups []clusterstate.NodeGroupState,
	total clusterstate.Readiness, now time.Time) (bool, error) {
	snapshot := sim.snapshot
	toPlace, pending, err := a.podsToPlace(snapshot, c, now)
	if err != nil {
		return false, err
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
	if atomic && a.scaleUpAtomic(sim, built, total, now) {
		// Other pending pods get their turn next iteration, as upstream
		// alternates request and pod scale-ups.
		return true, nil
	}
	if len(stillPending) == 0 {
		return false, nil
	}
	if !a.opts.ScaleUpFromZero && total.Ready == 0 {
		klog.InfoS("Scale-up: pending pods but the cluster has no ready node and scale-up from zero is off", "pods", len(stillPending))
		return false, nil
	}
	if allPodsNew(stillPending, now) {
		// As upstream: more pods of the same burst (a ReplicaSet's slow
		// start, several Deployments applied together) are likely on their
		// way; one decision for all of them packs them onto fewer, larger
		// nodes than one per fragment, which the next dip then empties and
		// drains. Scale-down waits too, as upstream's does in this loop.
		klog.V(1).InfoS("Scale-up: unschedulable pods are very new, waiting one iteration for more", "pods", len(stillPending), "buffer", newPodsBuffer)
		sim.newPodsWait, sim.newPodsAt = true, oldestCreation(stillPending).Add(newPodsBuffer)
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

// podsToPlace returns the pods scale-up places: the pending pods old
// enough to act on, those being evicted from nodes under drain (they need
// room as much), and the capacity APIs' fake pods after them. Pods waiting
// for preemption are put on their nominated nodes in the snapshot.
func (a *Autoscaler) podsToPlace(snapshot func() (*simulator.ClusterSnapshot, error), c clusterView, now time.Time) ([]*apiv1.Pod, pending.Pods, error) {
	waiting := pending.Filter(c.pods, a.opts, now, nodeNames(c.nodes))
	a.report.PendingPods(len(waiting.Eligible)+waiting.TooYoung+len(waiting.Nominated), waiting.SchedulerUnprocessed)
	if len(waiting.Nominated) > 0 {
		if err := a.placeNominated(snapshot, waiting.Nominated); err != nil {
			return nil, waiting, err
		}
	}
	draining := a.removals.Draining()
	drained := pending.Drained(c.pods, draining, a.opts.ExpendablePodsPriorityCutoff)
	if len(drained) > 0 {
		klog.V(1).InfoS("Scale-up: pods being evicted from nodes under drain are placed as pending pods", "pods", len(drained), "nodes", len(draining))
	}
	toPlace := append(slices.Clip(waiting.Eligible), drained...)
	// Processors add their fake pods after the real ones (which are placed
	// first) and after the metrics above, which count real pods only.
	toPlace, err := a.capacity.processors.Process(&fakepods.Context{Now: now}, toPlace)
	if err != nil {
		return nil, waiting, report.InternalError(fmt.Errorf("pod list processors: %w", err))
	}
	return toPlace, waiting, nil
}

// scaleUpAtomic answers a best-effort-atomic ProvisioningRequest, and
// reports whether it scaled up.
func (a *Autoscaler) scaleUpAtomic(sim *iterationSimulation, templates scaleup.Templates, total clusterstate.Readiness, now time.Time) bool {
	rs := &requestSimulation{a: a, snap: a.snapshot, quotas: sim.quotas, templates: templates.ByGroup, templateErrs: templates.Errors, readyNodes: total.Ready, now: now}
	scaled, err := a.capacity.requests.ScaleUpAtomic(rs, now)
	if err != nil {
		a.report.Error(report.InternalError(err))
		klog.ErrorS(err, "Scale-up: best-effort-atomic ProvisioningRequest")
	}
	return scaled
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
	// Within a priority largest first, as the estimator packed them when
	// it bought these nodes: in the order pods are listed, small ones took
	// the room a large one was bought for, and it got a node of its own
	// (issue 43's mixed burst: an s-4vcpu-8gb beside two s-8vcpu-16gb).
	ordered := simulator.PackingOrder(pods, a.allocatableOf(names))
	_, stillPending, err := simulator.TrySchedulePodsOnNew(a.checker, a.snapshot, ordered, names)
	if err != nil {
		return nil, report.InternalError(fmt.Errorf("filtering pods for upcoming nodes: %w", err))
	}
	if fit := len(pods) - len(stillPending); fit > 0 {
		klog.InfoS("Scale-up: pending pods will fit on upcoming nodes; no new request for them", "pods", fit, "upcomingNodes", upcoming, "byNodeGroup", added)
	}
	return stillPending, nil
}

// allocatableOf sums the allocatable cpu and memory of the snapshot's
// nodes named.
func (a *Autoscaler) allocatableOf(names map[string]bool) apiv1.ResourceList {
	var cpu, mem resource.Quantity
	for name := range names {
		ni, err := a.snapshot.GetNodeInfo(name)
		if err != nil {
			continue
		}
		alloc := ni.Node().Status.Allocatable
		cpu.Add(*alloc.Cpu())
		mem.Add(*alloc.Memory())
	}
	return apiv1.ResourceList{apiv1.ResourceCPU: cpu, apiv1.ResourceMemory: mem}
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

// newPodsBuffer is how old the oldest pod needing a new node must be before
// a scale-up acts: upstream's unschedulablePodTimeBuffer.
const newPodsBuffer = 2 * time.Second

// allPodsNew reports whether every pod was created within newPodsBuffer of
// now (upstream's allPodsAreNew). A pod without a creation time (a fake pod)
// counts as old.
func allPodsNew(pods []*apiv1.Pod, now time.Time) bool {
	if len(pods) == 0 {
		return false
	}
	for _, p := range pods {
		if !p.CreationTimestamp.Time.Add(newPodsBuffer).After(now) {
			return false
		}
	}
	return true
}

// oldestCreation is the earliest creation time among pods.
func oldestCreation(pods []*apiv1.Pod) time.Time {
	var oldest time.Time
	for _, p := range pods {
		if t := p.CreationTimestamp.Time; oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	return oldest
}
