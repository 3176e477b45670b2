package core

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/consolidation"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// consolidationState is what consolidation keeps from one iteration to the
// next: the command in flight (executor), the command held for the
// stabilization window, and what the status section shows.
type consolidationState struct {
	exec *consolidation.Executor
	stab *consolidation.Stabilizer
	// report is the loop's reporter.
	report *report.Reporter

	status   string
	statusAt time.Time
	// planned is the command held for the stabilization window.
	planned    *consolidation.Command
	lastResult string
	// savings: the hourly saving of the commands that succeeded.
	savings float64
	// moved: the workloads moved within --consolidation-workload-cooldown.
	moved *consolidation.Ledger
	// lifetimes: how long savings last here (the scale-ups' rhythm).
	lifetimes consolidation.Lifetimes
	// aborted: when each command (by Key) last aborted; it is not tried
	// again within abortBackoff, so a replacement that never becomes
	// usable is not bought again and again.
	aborted map[string]time.Time
	// unprofitable: the keys of the commands refused last loop for not
	// paying, so each refusal is counted once while it lasts.
	unprofitable map[string]bool
}

// abortBackoff is how long an aborted command is not tried again.
const abortBackoff = time.Hour

// consolidator returns the consolidation state, built on first use.
func (a *Autoscaler) consolidator() *consolidationState {
	if a.consolidation != nil {
		return a.consolidation
	}
	// The wait for a replacement is the wait for any new node: it must
	// register and become ready.
	timeout := a.opts.NodeGroupDefaults.MaxNodeProvisionTime + a.opts.MaxNodeStartupTime
	cs := &consolidationState{
		exec:    consolidation.NewExecutor(a.scaleUp, a.actuator, timeout),
		stab:    consolidation.NewStabilizer(a.opts.Consolidation.StabilizationWindow),
		report:  a.report,
		moved:   consolidation.NewLedger(a.opts.Consolidation.WorkloadCooldown),
		aborted: map[string]time.Time{},
	}
	// The ends of the old nodes' removals move a draining command on.
	a.removals.AddListener(cs.exec.RemovalEnded)
	a.consolidation = cs
	return cs
}

// consolidationPhase (--consolidation-enabled) moves the command in
// flight on, or, when none is, plans one on this iteration's snapshot and
// starts it once it has held for the stabilization window, inside the
// windows, with no scale-up recent or in progress (docs/consolidation.md).
func (a *Autoscaler) consolidationPhase(ctx context.Context, sim *iterationSimulation, c clusterView, now time.Time) {
	if !a.opts.Consolidation.Enabled {
		return
	}
	cs := a.consolidator()
	cs.planned = nil
	cs.prune(now)
	defer cs.publish()
	snap, err := sim.snapshot()
	if err != nil {
		klog.ErrorS(err, "Consolidation: no cluster snapshot; skipped")
		return
	}
	view := consolidation.View{
		Nodes: c.nodes, PodsByNode: podsByNode(sim.placed), Ready: a.usable(now), GroupOf: a.registry.NodeGroupIDForNode, Snapshot: snap, Checker: a.checker,
		DrainOptions: drain.NewOptions(a.opts, a.controllerReplicas), PDBs: c.pdbs, Now: now,
	}
	if _, drains := a.removals.InFlight(); drains > 0 || sim.drains > 0 {
		view.Busy = fmt.Sprintf("scale-down is draining %d node(s)", max(drains, sim.drains))
	}
	cs.record(cs.exec.Step(ctx, view), now)
	if cmd, phase, since := cs.exec.InFlight(); cmd != nil {
		cs.set(string(phase), since)
		return
	}
	if !config.AnyOpen(a.opts.Consolidation.Windows, now) {
		cs.stab.Reset()
		cs.set("OutsideWindow", now)
		return
	}
	why := view.Busy
	if why == "" {
		why = a.consolidationWait(now)
	}
	if why != "" {
		klog.V(2).InfoS("Consolidation: waiting", "why", why)
		cs.stab.Reset()
		cs.set("Waiting", now)
		return
	}
	cmd := a.planConsolidation(view, sim, c, now)
	isNew, ready := cs.stab.Observe(cmd, now)
	if cmd == nil {
		cs.set("Idle", now)
		return
	}
	if isNew {
		klog.InfoS("Consolidation: planned", "command", cmd.String(), "actsAfter", a.opts.Consolidation.StabilizationWindow)
		cs.record([]consolidation.Outcome{{Command: *cmd, Result: consolidation.Planned}}, now)
	}
	if !ready {
		cs.planned = cmd
		cs.set("Planned", cs.stab.Since())
		return
	}
	// Plan ran on this iteration's snapshot: the command is validated
	// just before it acts.
	cs.stab.Reset()
	a.acted = true
	cs.record(cs.exec.Start(ctx, *cmd, view), now)
	if cur, phase, since := cs.exec.InFlight(); cur != nil {
		cs.set(string(phase), since)
	} else {
		cs.set("Idle", now) // aborted at once (lastResult says why)
	}
}

// consolidationWait says why consolidation must not plan now ("" if it
// may): no flapping against scale-up, nor against nodes still coming.
// (Scale-down's drains are view.Busy: their pods need room the
// simulation does not see.)
func (a *Autoscaler) consolidationWait(now time.Time) string {
	window := a.opts.Consolidation.StabilizationWindow
	if !a.lastScaleUp.IsZero() && now.Sub(a.lastScaleUp) < window {
		return fmt.Sprintf("last scale-up %s ago (--consolidation-stabilization-window=%s)", now.Sub(a.lastScaleUp).Round(time.Second), window)
	}
	for _, gs := range a.registry.NodeGroups() {
		if gs.Upcoming > 0 {
			return fmt.Sprintf("node group %s has %d node(s) coming", gs.Group.Id(), gs.Upcoming)
		}
	}
	return ""
}

// planConsolidation gathers the planner's input (candidates with their
// prices, replacements, the budget) and plans.
func (a *Autoscaler) planConsolidation(view consolidation.View, sim *iterationSimulation, c clusterView, now time.Time) *consolidation.Command {
	pm, err := a.provider.Pricing()
	if err != nil {
		klog.V(2).InfoS("Consolidation: the provider prices no node; skipped", "err", err)
		return nil
	}
	price := func(n *apiv1.Node) (float64, error) { return pm.NodePrice(n, now, now.Add(time.Hour)) }
	groupOf := func(name string) (consolidation.Group, bool) {
		gs, ok := a.registry.NodeGroup(a.registry.NodeGroupIDForNode(name))
		if !ok {
			return consolidation.Group{}, false
		}
		return consolidation.Group{ID: gs.Group.Id(), Consolidate: gs.Options.Consolidate}, true
	}
	cs := a.consolidator()
	cands, skipped := consolidation.Candidates(consolidation.CandidateInput{
		Nodes: c.nodes, PodsByNode: view.PodsByNode, GroupOf: groupOf, Ready: view.Ready, Price: price, BeingDeleted: sim.beingDeleted,
		Held: sim.held, Moved: func(p *apiv1.Pod) bool { return cs.moved.Recent(p, now) },
	})
	for _, s := range skipped {
		klog.V(4).InfoS("Consolidation: not a candidate", "node", s.Node, "why", s.Why)
	}
	if len(cands) == 0 {
		return nil
	}
	fleet := len(cands) + len(skipped)
	removable := map[string]int{}
	for _, gs := range a.registry.NodeGroups() {
		id := gs.Group.Id()
		removable[id] = gs.Target - gs.Group.MinSize() - a.removals.DeletingInGroup(id)
	}
	maxima, minima := sim.quotas, sim.afterRemovals
	co := a.opts.Consolidation
	d := consolidation.Decide(consolidation.Input{
		Snapshot: view.Snapshot, Checker: a.checker, DrainOptions: view.DrainOptions, PDBs: c.pdbs,
		Candidates: cands, Replacements: a.replacements(c, pm, now), Removable: removable, Quotas: &maxima, Minima: &minima,
		Threshold: co.SavingsThreshold, MaxNodes: co.MaxDisrupted.Nodes(fleet), Now: now,
		Cost:      consolidation.CostModel{Horizon: cs.lifetimes.Horizon(now, co.SavingHorizon), EvictionCost: co.EvictionCost},
		BackedOff: func(key string) bool { at, ok := cs.aborted[key]; return ok && now.Sub(at) < abortBackoff },
	})
	cs.refused(d.Unprofitable)
	return d.Command
}

// replacements lists the nodes a command may add, cheapest first: a node
// of each consolidatable group with room, and, with node
// autoprovisioning, of each size a new pool may have (without labels or
// taints: pods that need them are left where they are).
func (a *Autoscaler) replacements(c clusterView, pm cloudprovider.PricingModel, now time.Time) []consolidation.Replacement {
	var out []consolidation.Replacement
	add := func(g cloudprovider.NodeGroup, tmpl *framework.NodeInfo, room int) {
		if tmpl == nil || room < 1 {
			return
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
	templates, _ := scaleup.BuildTemplates(a.provider, groups, c.nodes, a.registry.NodeGroupIDForNode, c.dss, a.checker, a.taints, c.dra.NodeSlices)
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
func (a *Autoscaler) usable(now time.Time) func(*apiv1.Node) bool {
	return func(n *apiv1.Node) bool { return !n.Spec.Unschedulable && a.registry.IsReady(n, now) }
}

// noteScaleUp records a scale-up: consolidation's stabilization and
// scale-down's delay count from it, and it is a sample of how long
// savings last.
func (a *Autoscaler) noteScaleUp(now time.Time) {
	a.lastScaleUp = now
	if a.opts.Consolidation.Enabled {
		a.consolidator().lifetimes.ScaledUp(now)
	}
}

// record hands outcomes to the reporter and keeps the last result, the
// savings, the workloads moved and the commands aborted.
func (cs *consolidationState) record(outcomes []consolidation.Outcome, now time.Time) {
	for _, o := range outcomes {
		cs.report.Consolidation(o)
		switch o.Result {
		case consolidation.DrainStarted:
			cs.moved.Record(o.Evicted, now)
		case consolidation.Succeeded:
			cs.savings += o.Command.Saving
			cs.lastResult = "succeeded: " + o.Command.String()
		case consolidation.Aborted:
			cs.aborted[o.Command.Key()] = now
			cs.lastResult = "aborted: " + o.Command.String() + ": " + o.Reason
		}
	}
}

// refused reports the commands refused because they do not pay, each once
// while it is refused loop after loop.
func (cs *consolidationState) refused(cmds []consolidation.Command) {
	seen := make(map[string]bool, len(cmds))
	for _, c := range cmds {
		k := c.Key()
		seen[k] = true
		if !cs.unprofitable[k] {
			klog.V(2).InfoS("Consolidation: refused, the saving does not pay for the disruption", "command", c.String())
			cs.report.Consolidation(consolidation.Outcome{Command: c, Result: consolidation.Unprofitable})
		}
	}
	cs.unprofitable = seen
}

// prune forgets what is older than its window: the ledger's workloads and
// the aborted commands past their backoff.
func (cs *consolidationState) prune(now time.Time) {
	cs.moved.Prune(now)
	for k, at := range cs.aborted {
		if now.Sub(at) >= abortBackoff {
			delete(cs.aborted, k)
		}
	}
}

// set records the status shown, and since when (kept while it lasts).
func (cs *consolidationState) set(status string, since time.Time) {
	if status != cs.status {
		cs.status, cs.statusAt = status, since
	}
}

// publish writes the status section.
func (cs *consolidationState) publish() {
	st := &api.ConsolidationStatus{Status: cs.status, LastResult: cs.lastResult, SavingsPerHour: fmt.Sprintf("%.4f", cs.savings)}
	if !cs.statusAt.IsZero() {
		st.Since = api.FormatTime(cs.statusAt)
	}
	if cmd, _, _ := cs.exec.InFlight(); cmd != nil {
		st.Command = cmd.String()
	} else if cs.planned != nil {
		st.Command = cs.planned.String()
	}
	cs.report.ConsolidationStatus(st)
}
