package scaledown

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/budgets"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// ScaleDown ties the planner, choose and the actuator together with the
// cooldowns.
type ScaleDown struct {
	opts     config.AutoscalingOptions
	registry *clusterstate.Registry
	planner  Planner
	actuator Actuator
	removals Removals

	lastDelete, lastFailure time.Time
	// keptFor is why each unneeded node waited last loop: a node's wait is
	// logged at --v=2 when it starts or its reason changes, not every loop.
	keptFor map[string]keptKind
	// lastMarkScan is when a loop last looked for pods whose deletion cost
	// this autoscaler set (see deletionCosts).
	lastMarkScan time.Time
	// deleted and failed are set when a removal ends (from its goroutine)
	// and turned into cooldown start times on the loop's clock by noteRemovalsEnded.
	deleted, failed atomic.Bool
}

// New returns a ScaleDown; removals is the tracker the actuator reports
// to, whose ends start the cooldowns (Listen).
func New(opts config.AutoscalingOptions, registry *clusterstate.Registry, planner Planner, actuator Actuator, removals Removals) *ScaleDown {
	return &ScaleDown{opts: opts, registry: registry, planner: planner, actuator: actuator, removals: removals}
}

// RemovalEnded is a deletiontracker.Listener: a deletion starts
// --scale-down-delay-after-delete, a failure
// --scale-down-delay-after-failure, from the next loop's time.
func (s *ScaleDown) RemovalEnded(_, _ string, outcome deletiontracker.Outcome) {
	switch outcome {
	case deletiontracker.Deleted:
		s.deleted.Store(true)
	case deletiontracker.Failed:
		s.failed.Store(true)
	}
}

// Result says what one scale-down pass did, for the reporter: the pass
// itself records nothing. The removals it started report their steps to
// the actuator's Outcomes as they happen.
type Result struct {
	// Planned is what the planner found; its Took is set even when the
	// pass failed in the planner, the rest only when it did not.
	Planned    Candidates
	Unneeded   int
	InCooldown bool
	Empty      []string // removal started
	Drained    []string // drain started
	// NextAt is when the next unneeded node reaches its unneeded (or
	// unready) time; zero when none waits for that.
	NextAt time.Time
	// Unremovable counts this loop's unremovable nodes by reason label
	// (once the removals chosen added theirs).
	Unremovable map[string]int
	// Skipped are the removals a cluster-wide minimum prevented.
	Skipped []Skipped
	// SoftTaints is what the soft tainting did; nil when it is off.
	SoftTaints *SoftTaintResult
	// DeletionCosts is what the pass did to the pods' deletion costs;
	// nil when it had nothing to do.
	DeletionCosts *DeletionCostResult
	// Took is how long the pass took, soft taints included.
	Took time.Duration
	// InFlight counts the removals still running when the pass ended
	// (drains, asynchronous deletes).
	InFlight int
}

// Started reports whether any removal started.
func (r Result) Started() bool { return len(r.Empty) > 0 || len(r.Drained) > 0 }

// noteRemovalsEnded turns the removals ended since the last call into
// cooldown start times on the loop's clock.
func (s *ScaleDown) noteRemovalsEnded(now time.Time) {
	if s.deleted.Swap(false) {
		s.lastDelete = now
	}
	if s.failed.Swap(false) {
		s.lastFailure = now
	}
}

// cooldown explains why removals must wait ("" when they need not).
func (s *ScaleDown) cooldown(now, lastScaleUp time.Time) string {
	if !lastScaleUp.IsZero() && now.Sub(lastScaleUp) < s.opts.ScaleDownDelayAfterAdd {
		return fmt.Sprintf("last scale-up %s ago (--scale-down-delay-after-add=%s)", now.Sub(lastScaleUp).Round(time.Second), s.opts.ScaleDownDelayAfterAdd)
	}
	if !s.lastDelete.IsZero() && now.Sub(s.lastDelete) < s.opts.ScaleDownDelayAfterDelete {
		return fmt.Sprintf("last node deletion %s ago (--scale-down-delay-after-delete=%s)", now.Sub(s.lastDelete).Round(time.Second), s.opts.ScaleDownDelayAfterDelete)
	}
	if !s.lastFailure.IsZero() && now.Sub(s.lastFailure) < s.opts.ScaleDownDelayAfterFailure {
		return fmt.Sprintf("last scale-down failure %s ago (--scale-down-delay-after-failure=%s)", now.Sub(s.lastFailure).Round(time.Second), s.opts.ScaleDownDelayAfterFailure)
	}
	return ""
}

// RunOnce updates the unneeded nodes and, outside cooldowns, starts removing
// those unneeded long enough. The result says what it found and did; the
// caller hands it to the reporter, also with an error (then only
// Planned.Took and Took are set).
func (s *ScaleDown) RunOnce(ctx context.Context, in PlannerInput, lastScaleUp time.Time) (res Result, err error) {
	start := time.Now()
	defer func() {
		res.Took = time.Since(start)
		res.InFlight, _ = s.removals.InFlight()
	}()
	s.noteRemovalsEnded(in.Now)
	if in.BeingDeleted == nil {
		in.BeingDeleted = s.removals.BeingDeleted()
	}
	if res.Planned, err = s.planner.Update(in); err != nil {
		return res, err
	}
	// Whatever this pass decides (cooldown included, as upstream), the
	// soft taints follow the unneeded nodes, once the removals it starts
	// are known.
	defer func() { res.SoftTaints = s.softTaint(ctx, in.Nodes, res.Empty, res.Drained) }()
	defer func() { res.DeletionCosts = s.deletionCosts(ctx, in, res.Empty, res.Drained) }()
	// Counted after the removals are chosen, which add their own reasons
	// (not unneeded long enough, min size, cluster minimums), as upstream.
	defer func() { res.Unremovable = s.planner.UnremovableCounts() }()
	unneeded := s.planner.Unneeded()
	res.Unneeded = len(unneeded)

	if why := s.cooldown(in.Now, lastScaleUp); why != "" {
		res.InCooldown = true
		if len(unneeded) > 0 {
			klog.InfoS("Scale-down: in cooldown, unneeded nodes wait", "unneeded", len(unneeded), "why", why)
		} else {
			klog.V(2).InfoS("Scale-down: in cooldown", "why", why)
		}
		return res, nil
	}
	if len(unneeded) == 0 {
		klog.V(1).InfoS("Scale-down: no unneeded nodes")
		return res, nil
	}

	removals, drains := s.removals.InFlight()
	b := budgets.New(s.opts.MaxScaleDownParallelism, s.opts.MaxDrainParallelism, removals, drains)
	plan := choose(unneeded, s.groupFacts(unneeded), b, in.Quotas, in.Now)
	res.NextAt = plan.NextAt
	res.Skipped = s.recordKept(plan.Kept)
	res.Empty = s.startEmpty(ctx, plan.Empty)
	res.Drained = s.startDrains(ctx, plan.Drain, in.Now)
	s.noteRemovalsEnded(in.Now)
	if res.Started() {
		// The delay after delete runs from the start of a removal (and again
		// from its end, see noteRemovalsEnded), as upstream's does.
		s.lastDelete = in.Now
	}
	return res, nil
}

// softTaint hands the actuator the nodes of the autoscaled groups, split
// into unneeded and needed; nodes being removed, or whose removal this
// pass started (and maybe already ended), are left alone. nil: soft
// tainting is off (--max-bulk-soft-taint-count=0).
func (s *ScaleDown) softTaint(ctx context.Context, nodes []*apiv1.Node, started ...[]string) *SoftTaintResult {
	if s.opts.MaxBulkSoftTaintCount == 0 {
		return nil
	}
	unneeded := map[string]bool{}
	for _, u := range s.planner.Unneeded() {
		unneeded[u.Node.Name] = true
	}
	beingDeleted := maps.Clone(s.removals.BeingDeleted())
	if beingDeleted == nil {
		beingDeleted = map[string]bool{}
	}
	for _, names := range started {
		for _, n := range names {
			beingDeleted[n] = true
		}
	}
	var taint, untaint []*apiv1.Node
	for _, n := range nodes {
		if beingDeleted[n.Name] || s.registry.NodeGroupIDForNode(n.Name) == "" {
			continue
		}
		if unneeded[n.Name] {
			taint = append(taint, n)
		} else {
			untaint = append(untaint, n)
		}
	}
	res := s.actuator.SoftTaint(ctx, taint, untaint)
	return &res
}

// groupFacts reads, for the groups of the unneeded nodes, what choose needs:
// min size, target, removals in flight and unneeded times.
func (s *ScaleDown) groupFacts(unneeded []*UnneededNode) map[string]GroupFacts {
	out := map[string]GroupFacts{}
	for _, u := range unneeded {
		if _, done := out[u.GroupID]; done {
			continue
		}
		gs, ok := s.registry.NodeGroup(u.GroupID)
		if !ok {
			continue
		}
		// The in-flight count first, the provider's target after it: see
		// GroupFacts.Deleting.
		f := GroupFacts{MinSize: gs.Group.MinSize(), Deleting: s.removals.DeletingInGroup(u.GroupID), Target: gs.Target,
			UnneededTime: gs.Options.ScaleDownUnneededTime, UnreadyTime: gs.Options.ScaleDownUnreadyTime}
		if t, err := gs.Group.TargetSize(); err == nil && t < f.Target {
			f.Target = t
		}
		out[u.GroupID] = f
	}
	return out
}

// keptKind is what a node waits for: a reason, or for NoReason (a removal
// budget) the words of the wait.
type keptKind struct {
	reason simulator.UnremovableReason
	budget string
}

// recordKept tells the planner why unneeded nodes stay, logs it and returns
// the removals a cluster-wide minimum prevented. A node's line is at --v=2
// when it starts waiting or waits for something else than last loop, at
// --v=4 otherwise ("unneeded for 3m0s of 10m0s" would otherwise be a line
// per node per loop: a thousand at 1,000 idle nodes); one --v=2 line per
// loop counts them.
func (s *ScaleDown) recordKept(kept []Kept) []Skipped {
	last := s.keptFor
	s.keptFor = make(map[string]keptKind, len(kept))
	timers := 0
	var skipped []Skipped
	for _, k := range kept {
		if k.Reason != simulator.NoReason {
			s.planner.RecordUnremovable(k.Node.Node.Name, k.Reason)
		}
		if k.Minimum != "" {
			skipped = append(skipped, Skipped{Node: k.Node.Node.Name, Minimum: k.Minimum})
		}
		kind := keptKind{reason: k.Reason}
		if k.Reason == simulator.NoReason {
			kind.budget = k.Why
		}
		if k.Reason == simulator.NotUnneededLongEnough || k.Reason == simulator.NotUnreadyLongEnough {
			timers++
		}
		prev, seen := last[k.Node.Node.Name]
		s.keptFor[k.Node.Node.Name] = kind
		v := klog.Level(4)
		if !seen || prev != kind {
			v = 2
		}
		if logger := klog.V(v); logger.Enabled() {
			logger.InfoS("Scale-down: unneeded node waits", "node", klog.KObj(k.Node.Node), "nodeGroup", k.Node.GroupID, "why", k.Why)
		}
	}
	if len(kept) > 0 {
		klog.V(2).InfoS("Scale-down: unneeded nodes wait", "count", len(kept), "forUnneededTime", timers)
	}
	return skipped
}

// startEmpty hands the empty nodes to the actuator and returns their names.
func (s *ScaleDown) startEmpty(ctx context.Context, empty []*UnneededNode) []string {
	if len(empty) == 0 {
		return nil
	}
	names := make([]string, len(empty))
	for i, u := range empty {
		names[i] = u.Node.Name
		s.planner.Forget(u.Node.Name)
	}
	klog.InfoS("Scale-down: removing empty nodes", "count", len(empty), "nodes", strings.Join(names, ", "))
	s.actuator.DeleteEmpty(ctx, empty)
	return names
}

// startDrains hands the nodes to drain to the actuator and returns their names.
func (s *ScaleDown) startDrains(ctx context.Context, drains []*UnneededNode, now time.Time) []string {
	var names []string
	for _, u := range drains {
		names = append(names, u.Node.Name)
		s.planner.Forget(u.Node.Name)
		why := "underutilized"
		if u.Unready {
			why = "unready"
		}
		klog.InfoS("Scale-down: removing node", "node", klog.KObj(u.Node), "nodeGroup", u.GroupID, "why", why,
			"resource", ResourceLabel(u.Utilization), "utilization", fmt.Sprintf("%.2f", u.Utilization.Utilization),
			"unneededFor", now.Sub(u.Since).Round(time.Second), "podsToEvict", len(u.PodsToEvict),
			"pods", framework.PodNames(u.PodsToEvict, 5))
	}
	if len(drains) > 0 {
		s.actuator.Drain(ctx, drains)
	}
	return names
}
