package core

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/consolidation"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// consolidator returns consolidation's phase, built on first use.
func (a *Autoscaler) consolidator() *consolidation.Phase {
	if a.consolidation != nil {
		return a.consolidation
	}
	exec := consolidation.NewExecutor(a.scaleUp, a.actuator, a.replacementTimeout)
	// The ends of the old nodes' removals move a draining command on.
	a.removals.AddListener(exec.RemovalEnded)
	opts := a.opts.Consolidation
	opts.AwaitScaleIn = a.opts.PodDeletionCostOnUnneededNodes && a.opts.ScaleDownEnabled
	a.consolidation = consolidation.NewPhase(opts, exec, a.report)
	return a.consolidation
}

// consolidationPlanned returns the pods the command consolidation holds
// would evict, by node (consolidation.Phase.PlannedPods); nil when none.
func (a *Autoscaler) consolidationPlanned() map[string][]*apiv1.Pod {
	if a.consolidation == nil {
		return nil
	}
	return a.consolidation.PlannedPods()
}

// replacementTimeout is how long a replacement's nodes may take: the wait
// for any new node of its group, which must register within the group's
// provision time (a size's own, from max_node_provision_time_by_size, or
// --max-node-provision-time) and then become ready
// (--max-node-startup-time).
func (a *Autoscaler) replacementTimeout(r *consolidation.Replacement) time.Duration {
	provision := a.opts.NodeGroupDefaults.MaxNodeProvisionTime
	if r != nil && r.Group != nil {
		provision = clusterstate.NodeGroupOptions(r.Group, a.opts.NodeGroupDefaults).MaxNodeProvisionTime
	}
	return provision + a.opts.MaxNodeStartupTime
}

// consolidationPhase (--consolidation-enabled) runs consolidation's phase
// on the cluster this iteration's earlier phases left (sim).
func (a *Autoscaler) consolidationPhase(ctx context.Context, sim *iterationSimulation, c clusterView, now time.Time) {
	if !a.opts.Consolidation.Enabled {
		return
	}
	// A cluster none of whose pools consolidates pays for no snapshot and
	// no reading of its pods' requests: at 5,000 nodes these doubled the
	// loop (issue 44).
	if cmd, _, _ := a.consolidator().InFlight(); cmd == nil && !a.anyGroupConsolidates() {
		a.consolidator().Idle(now, "no node group consolidates")
		return
	}
	snap, err := sim.snapshot()
	if err != nil {
		klog.ErrorS(err, "Consolidation: no cluster snapshot; skipped")
		return
	}
	l := consolidation.Loop{
		View: consolidation.View{
			Nodes: c.nodes, PodsByNode: sim.podsByNode(), Ready: a.usable, GroupOf: a.registry.NodeGroupIDForNode,
			Snapshot: snap, Checker: a.checker, DrainOptions: drain.NewOptions(a.opts, a.controllerReplicas), PDBs: c.pdbs, Now: now,
		},
		LastScaleUp: a.lastScaleUp,
		Demand: sync.OnceValue(func() consolidation.Demand {
			d := consolidation.Demand{Requested: a.consolidator().Requested(sim.placed)}
			for _, n := range c.nodes {
				if resourcequotas.IsLive(n, sim.beingDeleted) {
					d.Allocatable = d.Allocatable.Plus(consolidation.Allocatable(n))
				}
			}
			return d
		}),
	}
	if _, drains := a.removals.InFlight(); drains > 0 || sim.drains > 0 {
		l.View.Busy = fmt.Sprintf("scale-down is draining %d node(s)", max(drains, sim.drains))
	}
	for _, gs := range a.registry.NodeGroups() {
		if gs.Upcoming > 0 {
			l.Wait = fmt.Sprintf("node group %s has %d node(s) coming", gs.Group.Id(), gs.Upcoming)
			break
		}
	}
	// Scale-down's removals come first: whole underused nodes, each after
	// its unneeded time. Consolidation plans on what they leave; acting
	// beside them only moved pods that scale-down's next removals would
	// have let stay (a compressed day: on beside off, 12 more evictions
	// and the same bill).
	if n := a.planner.UnneededCount(); n > 0 && l.Wait == "" {
		l.Wait = fmt.Sprintf("scale-down has %d unneeded node(s) to remove first", n)
	}
	pm, err := a.provider.Pricing()
	l.Candidates = func() (consolidation.CandidateInput, bool) {
		if err != nil {
			klog.V(2).InfoS("Consolidation: the provider prices no node; skipped", "err", err)
			return consolidation.CandidateInput{}, false
		}
		return a.consolidationCandidates(l.View, sim, c, pm), true
	}
	l.Input = func() consolidation.Input { return a.consolidationInput(l.View, sim, c, pm) }
	l.State = a.consolidationState(snap, sim, c, now)
	if a.consolidator().Run(ctx, l) {
		a.acted = true
	}
}

// consolidationState names what this loop gives consolidation's plan
// besides the phase's own (consolidation.Loop.State): the snapshot's
// content once the earlier phases took out what they removed (its
// version: a node's heartbeat leaves it, any change the simulation can
// tell gives a new one, and so does every loop of a cluster with DRA
// objects), the node groups as the registry has them, the nodes held or
// being removed, scale-down's unneeded nodes and the limits. Prices are
// fixed per size; what changes with time alone is left to the phase.
func (a *Autoscaler) consolidationState(snap *simulator.ClusterSnapshot, sim *iterationSimulation, c clusterView, now time.Time) uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, snap.Version(), " ", a.planner.UnneededCount(), " ", c.limits.MaxNodes, c.limits.MinMilliCPU, c.limits.MaxMilliCPU,
		c.limits.MinMemory, c.limits.MaxMemory)
	if m := c.limits.Money; m != nil {
		fmt.Fprint(h, " money ", m.MaxHourly)
	}
	if q := c.limits.Instances; q != nil {
		fmt.Fprint(h, " instances ", q.Limit, q.Instances, q.Headroom)
	}
	for _, gs := range a.registry.NodeGroups() {
		id := gs.Group.Id()
		off, _, _ := a.registry.BackedOff(id, now)
		unavailable := ""
		if r, ok := gs.Group.(cloudprovider.AvailabilityReporter); ok {
			unavailable = r.Unavailable()
		}
		fmt.Fprintf(h, "|%s %d %d %d %d %d %+v %t %t %s", id, gs.Target, gs.Upcoming, gs.Group.MinSize(), gs.Group.MaxSize(),
			a.removals.DeletingInGroup(id), gs.Options, gs.Healthy, off, unavailable)
	}
	for _, names := range [][]string{slices.Sorted(maps.Keys(sim.held)), slices.Sorted(maps.Keys(sim.beingDeleted))} {
		fmt.Fprint(h, "|", names)
	}
	return max(h.Sum64(), 1) // 0 is "unknown"
}

// anyGroupConsolidates tells whether some node group's nodes may be
// consolidation's candidates.
func (a *Autoscaler) anyGroupConsolidates() bool {
	for _, gs := range a.registry.NodeGroups() {
		if gs.Options.Consolidate {
			return true
		}
	}
	return false
}

// consolidationCandidates is the candidates' input as the cluster gives
// it: each node's group and price.
func (a *Autoscaler) consolidationCandidates(view consolidation.View, sim *iterationSimulation, c clusterView, pm cloudprovider.PricingModel) consolidation.CandidateInput {
	now := view.Now
	groupOf := func(name string) (consolidation.Group, bool) {
		gs, ok := a.registry.NodeGroup(a.registry.NodeGroupIDForNode(name))
		if !ok {
			return consolidation.Group{}, false
		}
		return consolidation.Group{ID: gs.Group.Id(), Consolidate: gs.Options.Consolidate, UnneededTime: gs.Options.ScaleDownUnneededTime}, true
	}
	return consolidation.CandidateInput{
		Nodes: c.nodes, PodsByNode: view.PodsByNode, GroupOf: groupOf, Ready: view.Ready, BeingDeleted: sim.beingDeleted, Held: sim.held,
		ScaleDownUnneeded: a.planner.IsUnneeded,
		Price:             func(n *apiv1.Node) (float64, error) { return pm.NodePrice(n, now, now.Add(time.Hour)) },
	}
}

// consolidationInput is the planner's input as the cluster gives it:
// replacements, min sizes and limits, built once some node is a candidate.
func (a *Autoscaler) consolidationInput(view consolidation.View, sim *iterationSimulation, c clusterView, pm cloudprovider.PricingModel) consolidation.Input {
	now := view.Now
	removable := map[string]int{}
	for _, gs := range a.registry.NodeGroups() {
		id := gs.Group.Id()
		removable[id] = gs.Target - gs.Group.MinSize() - a.removals.DeletingInGroup(id)
	}
	maxima, minima := sim.quotas, sim.afterRemovals
	return consolidation.Input{
		Snapshot: view.Snapshot, Checker: a.checker, DrainOptions: view.DrainOptions, PDBs: c.pdbs,
		Replacements: a.replacements(sim, c, pm, now), Removable: removable, Quotas: &maxima, Minima: &minima, Now: now,
	}
}

// replacements lists the nodes a command may add, cheapest first: a node
// of each consolidatable group with room, and, with node
// autoprovisioning, of each size a new pool may have (without labels or
// taints: pods that need them are left where they are).
func (a *Autoscaler) replacements(sim *iterationSimulation, c clusterView, pm cloudprovider.PricingModel, now time.Time) []consolidation.Replacement {
	var out []consolidation.Replacement
	add := func(g cloudprovider.NodeGroup, tmpl *framework.NodeInfo, room int) {
		if tmpl == nil || room < 1 {
			return
		}
		if a, ok := g.(cloudprovider.AvailabilityReporter); ok {
			// A size held unavailable (no capacity, nodes that never
			// came): the next cheapest replacement is taken instead.
			if why := a.Unavailable(); why != "" {
				klog.V(4).InfoS("Consolidation: replacement unavailable", "nodeGroup", g.Id(), "why", why)
				return
			}
		}
		p, err := pm.NodePrice(tmpl.Node(), now, now.Add(time.Hour))
		if err != nil {
			klog.V(4).InfoS("Consolidation: replacement without a price", "nodeGroup", g.Id(), "err", err)
			return
		}
		size := tmpl.Node().Labels[apiv1.LabelInstanceTypeStable]
		if size == "" {
			size = g.Id()
		}
		out = append(out, consolidation.Replacement{Group: g, Template: tmpl, Size: size, Price: p, Room: room})
	}
	var groups []clusterstate.NodeGroupState
	owned := 0
	for _, gs := range a.registry.NodeGroups() {
		if gs.Group.Autoprovisioned() {
			owned++
		}
		if off, _, _ := a.registry.BackedOff(gs.Group.Id(), now); gs.Options.Consolidate && gs.Healthy && !off {
			groups = append(groups, gs)
		}
	}
	templates := sim.templates().ByGroup
	for _, gs := range groups {
		add(gs.Group, templates[gs.Group.Id()], gs.Group.MaxSize()-gs.Target)
	}
	if a.opts.NodeAutoprovisioningEnabled && owned < a.opts.MaxAutoprovisionedNodeGroupCount {
		sizes, err := a.provider.GetAvailableMachineTypes()
		if err != nil {
			klog.V(2).InfoS("Consolidation: no new node pool as a replacement", "err", err)
		}
		for _, size := range sizes {
			g, err := a.provider.NewNodeGroup(size, nil, nil, nil, nil)
			if err != nil {
				continue
			}
			if off, _, _ := a.registry.BackedOff(g.Id(), now); off {
				continue
			}
			base, err := g.TemplateNodeInfo()
			if err != nil {
				continue
			}
			tmpl, err := simulator.SanitizedTemplateNodeInfo(base, "template-"+g.Id(), c.dss, a.checker)
			if err != nil {
				continue
			}
			add(g, tmpl, g.MaxSize())
		}
	}
	slices.SortStableFunc(out, func(x, y consolidation.Replacement) int { return cmp.Compare(x.Price, y.Price) })
	return out
}

// usable is the readiness rule consolidation shares with the cluster
// state registry (Registry.IsReady: startup taints and devices included),
// and not cordoned: a node pods can be moved to, or from which they may be
// moved.
func (a *Autoscaler) usable(n *apiv1.Node) bool {
	return !n.Spec.Unschedulable && a.registry.IsReady(n)
}

// noteScaleUp records a scale-up: consolidation's stabilization and
// scale-down's delay count from it, and it is a sample of how long
// savings last.
func (a *Autoscaler) noteScaleUp(now time.Time) {
	a.lastScaleUp = now
	if a.opts.Consolidation.Enabled {
		a.consolidator().ScaledUp(now)
	}
}
