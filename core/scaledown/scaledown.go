package scaledown

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// ScaleDown ties the planner and the actuator together with the cooldowns.
type ScaleDown struct {
	opts     config.AutoscalingOptions
	registry *clusterstate.Registry
	Planner  *Planner
	Actuator *Actuator

	lastDelete, lastFailure time.Time
	seenDeletions           int
	seenFailures            int
}

// New returns a ScaleDown.
func New(opts config.AutoscalingOptions, registry *clusterstate.Registry, planner *Planner, actuator *Actuator) *ScaleDown {
	return &ScaleDown{opts: opts, registry: registry, Planner: planner, Actuator: actuator}
}

// Result says what one scale-down pass did.
type Result struct {
	Unneeded   int
	InCooldown bool
	Empty      []string // removal started
	Drained    []string // drain started
	// NextAt is when the next unneeded node reaches its unneeded (or
	// unready) time; zero when none waits for that.
	NextAt time.Time
}

// Started reports whether any removal started.
func (r Result) Started() bool { return len(r.Empty) > 0 || len(r.Drained) > 0 }

// observe turns completed actuations into cooldown start times on the
// loop's clock.
func (s *ScaleDown) observe(now time.Time) {
	d, f := s.Actuator.Counts()
	if d > s.seenDeletions {
		s.lastDelete = now
	}
	if f > s.seenFailures {
		s.lastFailure = now
	}
	s.seenDeletions, s.seenFailures = d, f
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
// those unneeded long enough.
func (s *ScaleDown) RunOnce(ctx context.Context, in PlannerInput, lastScaleUp time.Time) (Result, error) {
	var res Result
	start := time.Now()
	defer metrics.UpdateDurationFromStart(metrics.ScaleDown, start)
	s.observe(in.Now)
	if in.BeingDeleted == nil {
		in.BeingDeleted = s.Actuator.BeingDeleted()
	}
	if err := s.Planner.Update(in); err != nil {
		return res, err
	}
	// Counted after the removals are chosen, which add their own reasons
	// (not unneeded long enough, min size, cluster minimums), as upstream.
	defer func() { metrics.UpdateUnremovableNodesCount(s.Planner.unremovable.countsByLabel()) }()
	unneeded := s.Planner.Unneeded()
	res.Unneeded = len(unneeded)

	if why := s.cooldown(in.Now, lastScaleUp); why != "" {
		res.InCooldown = true
		metrics.UpdateScaleDownInCooldown(true)
		if len(unneeded) > 0 {
			klog.Infof("Scale-down: in cooldown, %d unneeded node(s) wait: %s", len(unneeded), why)
		} else {
			klog.V(2).Infof("Scale-down: in cooldown: %s", why)
		}
		return res, nil
	}
	metrics.UpdateScaleDownInCooldown(false)
	if len(unneeded) == 0 {
		klog.V(1).Infof("Scale-down: no unneeded nodes")
		return res, nil
	}

	empty, drain, next := s.choose(unneeded, in)
	res.NextAt = next
	res.Empty = s.startEmpty(ctx, empty)
	res.Drained = s.startDrains(ctx, drain, in.Now)
	s.observe(in.Now)
	if res.Started() {
		// The delay after delete runs from the start of a removal (and again
		// from its end, see observe), as upstream's does.
		s.lastDelete = in.Now
	}
	return res, nil
}

// startEmpty hands the empty nodes to the actuator and returns their names.
func (s *ScaleDown) startEmpty(ctx context.Context, empty []*Candidate) []string {
	if len(empty) == 0 {
		return nil
	}
	names := make([]string, len(empty))
	for i, c := range empty {
		names[i] = c.Node.Name
		s.Planner.Forget(c.Node.Name)
	}
	klog.Infof("Scale-down: removing %d empty node(s): %s", len(empty), strings.Join(names, ", "))
	s.Actuator.DeleteEmpty(ctx, empty)
	return names
}

// startDrains hands the nodes to drain to the actuator and returns their names.
func (s *ScaleDown) startDrains(ctx context.Context, drains []*Candidate, now time.Time) []string {
	var names []string
	for _, c := range drains {
		names = append(names, c.Node.Name)
		s.Planner.Forget(c.Node.Name)
		why := "underutilized"
		if c.Unready {
			why = "unready"
		}
		klog.Infof("Scale-down: removing node %s (%s, %s utilization %.2f, unneeded for %s): %d pod(s) to evict: %s",
			c.Node.Name, why, resourceLabel(c.Utilization), c.Utilization.Utilization,
			now.Sub(c.Since).Round(time.Second), len(c.PodsToEvict), framework.PodNames(c.PodsToEvict, 5))
	}
	if len(drains) > 0 {
		s.Actuator.Drain(ctx, drains)
	}
	return names
}

// removalBudgets: how many removals may start now, in all and with a drain:
// --max-scale-down-parallelism and --max-drain-parallelism minus the
// removals in flight, as upstream's budgets count them.
func (s *ScaleDown) removalBudgets() (total, drains int) {
	inFlight, draining := s.Actuator.InFlight()
	total = max(0, s.opts.MaxScaleDownParallelism-inFlight)
	drains = max(0, min(s.opts.MaxDrainParallelism-draining, total))
	return total, drains
}

// choose picks, in Unneeded's order (empty nodes first), the nodes whose
// removal starts now, within the removal budgets, keeping every group above
// its min size and the cluster above --cores-total / --memory-total minimums.
func (s *ScaleDown) choose(unneeded []*Candidate, in PlannerInput) (empty, drain []*Candidate, nextAt time.Time) {
	quotas := in.Quotas
	picked := map[string]int{}
	budget, drainBudget := s.removalBudgets()
	for _, c := range unneeded {
		gs, ok := s.registry.NodeGroup(c.GroupID)
		if !ok {
			continue
		}
		threshold := gs.Options.ScaleDownUnneededTime
		if c.Unready {
			threshold = gs.Options.ScaleDownUnreadyTime
		}
		if d := in.Now.Sub(c.Since); d < threshold {
			if at := c.Since.Add(threshold); nextAt.IsZero() || at.Before(nextAt) {
				nextAt = at
			}
			reason := simulator.NotUnneededLongEnough
			if c.Unready {
				reason = simulator.NotUnreadyLongEnough
			}
			s.Planner.unremovable.record(c.Node.Name, reason)
			klog.V(2).Infof("Scale-down: node %s unneeded for %s of %s", c.Node.Name, d.Round(time.Second), threshold)
			continue
		}
		if len(empty)+len(drain) >= budget {
			klog.V(2).Infof("Scale-down: node %s waits: %d node(s) already being removed (--max-scale-down-parallelism=%d)",
				c.Node.Name, s.opts.MaxScaleDownParallelism-budget+len(empty)+len(drain), s.opts.MaxScaleDownParallelism)
			continue
		}
		if !c.Empty && len(drain) >= drainBudget {
			klog.V(2).Infof("Scale-down: node %s waits: %d node(s) already being drained (--max-drain-parallelism=%d)",
				c.Node.Name, s.opts.MaxDrainParallelism-drainBudget+len(drain), s.opts.MaxDrainParallelism)
			continue
		}
		// The target was read at the start of the loop, and a removal may have
		// finished since, leaving the in-flight count. The in-flight count is
		// read first and the target again after it: a removal finishing in
		// between is counted twice (a node kept), never missed.
		deleting := s.Actuator.DeletingInGroup(c.GroupID)
		target := gs.Target
		if t, err := gs.Group.TargetSize(); err == nil && t < target {
			target = t
		}
		size := target - deleting - picked[c.GroupID]
		if size <= gs.Group.MinSize() {
			s.Planner.unremovable.record(c.Node.Name, simulator.NodeGroupMinSizeReached)
			klog.V(2).Infof("Scale-down: node %s unneeded but node group %s would go below its min size %d", c.Node.Name, c.GroupID, gs.Group.MinSize())
			continue
		}
		if short := quotas.CheckRemoval(c.Node); short != "" {
			s.Planner.unremovable.record(c.Node.Name, simulator.MinimalResourceLimitExceeded)
			klog.V(2).InfoS("Scale-down: node unneeded but the cluster would go below its minimum", "node", klog.KObj(c.Node), "resource", short)
			metrics.RegisterSkippedScaleDown(skippedLabel(short))
			continue
		}
		quotas.Remove(c.Node)
		picked[c.GroupID]++
		if c.Empty {
			empty = append(empty, c)
		} else {
			drain = append(drain, c)
		}
	}
	return empty, drain, nextAt
}

// skippedLabel is the skipped_scale_events_count reason of a minimum.
func skippedLabel(r resourcequotas.Resource) string {
	if r == resourcequotas.CPU {
		return metrics.SkippedCPUResourceLimit
	}
	return metrics.SkippedMemoryResourceLimit
}
