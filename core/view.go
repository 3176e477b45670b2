package core

import (
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// The views of one iteration: clusterView is what the caches held when it
// began; iterationSimulation is the cluster the phases plan on, and what
// each phase took from it.

// clusterView is what an iteration reads from the informer caches.
type clusterView struct {
	nodes []*apiv1.Node
	pods  []*apiv1.Pod
	pdbs  []*policyv1.PodDisruptionBudget
	dss   []*appsv1.DaemonSet
	// DRA objects, read as they are: each consumer builds its own
	// dra.Snapshot of them (newDRA).
	resourceSlices []*resourceapi.ResourceSlice
	resourceClaims []*resourceapi.ResourceClaim
	deviceClasses  []*resourceapi.DeviceClass
	// dra: a read-only snapshot of them for utilization, readiness and
	// templates (the simulation gets its own).
	dra *dra.Snapshot
	// limits are the cluster-wide limits (flags and the provider's
	// resource limiter), computed once per iteration.
	limits resourcequotas.Limits
}

// newDRA returns a fresh snapshot of the cluster's DRA objects: cheap
// (maps of pointers), and each user may change its own in forks.
func (c clusterView) newDRA() *dra.Snapshot {
	return dra.NewSnapshot(c.resourceSlices, c.resourceClaims, c.deviceClasses)
}

// clusterObjects reads the informer caches.
func (a *Autoscaler) clusterObjects() (clusterView, error) {
	var c clusterView
	var err error
	if c.nodes, err = a.cache.nodes.List(labels.Everything()); err != nil {
		return c, fmt.Errorf("listing nodes: %w", err)
	}
	if c.pods, err = a.cache.pods.List(labels.Everything()); err != nil {
		return c, fmt.Errorf("listing pods: %w", err)
	}
	if c.pdbs, err = a.cache.pdbs.List(labels.Everything()); err != nil {
		return c, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	if c.dss, err = a.cache.dss.List(labels.Everything()); err != nil {
		return c, fmt.Errorf("listing DaemonSets: %w", err)
	}
	if c.resourceSlices, err = a.cache.resourceSlices.List(labels.Everything()); err != nil {
		return c, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	if c.resourceClaims, err = a.cache.resourceClaims.List(labels.Everything()); err != nil {
		return c, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	if c.deviceClasses, err = a.cache.deviceClasses.List(labels.Everything()); err != nil {
		return c, fmt.Errorf("listing DeviceClasses: %w", err)
	}
	return c, nil
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
	// newPodsWait: the pods needing new nodes are all very new; this loop
	// neither scales up nor removes anything (allPodsNew). The loop wakes
	// at newPodsAt, when the oldest of them is old enough.
	newPodsWait bool
	newPodsAt   time.Time
	// held: node name to the phase that acted on it this loop or holds it
	// (a consolidation command in flight).
	held   map[string]string
	placed []*apiv1.Pod
	// byNode: placed by node, built on first use (podsByNode) and shared
	// by the phases, which only read it.
	byNode   map[string][]*apiv1.Pod
	snapshot func() (*simulator.ClusterSnapshot, error)
	// built: the snapshot was built (its iteration layer is in use).
	built bool
	// drains counts the drains a phase started in this iteration: their
	// pods need room no later plan sees (their nodes left the snapshot).
	drains int
	// templates returns every node group's template, built once per
	// iteration on first use and shared by the phases.
	templates func() scaleup.Templates
	// quotas counts the nodes against the cluster-wide maxima: the live
	// ones, and those being removed that the cloud still counts in their
	// group's target (a removal may still fail, in this iteration or an
	// earlier one). afterRemovals counts every node being removed gone,
	// for the minima.
	quotas, afterRemovals resourcequotas.Tracker
}

// The phases that hold nodes, as iterationSimulation.held names them.
const (
	heldByScaleDown     = "scale-down"
	heldByConsolidation = "a consolidation command in flight"
)

func (a *Autoscaler) newIterationSimulation(c clusterView, groups []clusterstate.NodeGroupState) *iterationSimulation {
	// Nodes whose instance the cloud no longer has are gone, whoever
	// deleted them: no phase counts them or places a pod on them.
	beingDeleted := a.removals.BeingDeleted()
	if gone := a.registry.Gone(); len(gone) > 0 {
		beingDeleted = maps.Clone(beingDeleted)
		if beingDeleted == nil {
			beingDeleted = map[string]bool{}
		}
		for name := range gone {
			beingDeleted[name] = true
		}
	}
	sim := &iterationSimulation{
		beingDeleted: beingDeleted,
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
			t := scaleup.BuildTemplates(a.provider, groups, c.nodes, a.registry.NodeGroupIDForNode, a.registry.IsReady, c.dss, a.checker, a.taints, c.dra.NodeSlices)
			a.report.Templates(t)
			templates = &t
		}
		return *templates
	}
	sim.afterRemovals = resourcequotas.NewTracker(c.limits, c.nodes, sim.beingDeleted)
	sim.quotas = sim.afterRemovals.WithLeaving(c.nodes, sim.beingDeleted, a.registry.InTarget)
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

// podsByNode returns the placed pods by the node they are bound to.
func (sim *iterationSimulation) podsByNode() map[string][]*apiv1.Pod {
	if sim.byNode == nil {
		sim.byNode = podsByNode(sim.placed)
	}
	return sim.byNode
}

// remove records that phase started removing nodes, empty ones and ones
// it drains: the later phases neither count them against the minima nor
// place pods on them, none acts on them, and a drain's pods, which need
// room no later plan sees, hold consolidation back (drains).
func (sim *iterationSimulation) remove(phase string, empty, drained []string, nodes []*apiv1.Node) error {
	names := append(slices.Clip(empty), drained...)
	if len(names) == 0 {
		return nil
	}
	sim.drains += len(drained)
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
