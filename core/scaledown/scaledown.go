package scaledown

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// ScaleDown ties the planner and the actuator together with the cooldowns.
type ScaleDown struct {
	opts     config.AutoscalingOptions
	provider cloudprovider.CloudProvider
	registry *clusterstate.Registry
	Planner  *Planner
	Actuator *Actuator

	lastDelete, lastFailure time.Time
	seenDeletions           int
	seenFailures            int
}

// New returns a ScaleDown.
func New(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, registry *clusterstate.Registry,
	planner *Planner, actuator *Actuator) *ScaleDown {
	return &ScaleDown{opts: opts, provider: provider, registry: registry, Planner: planner, Actuator: actuator}
}

// Result says what one scale-down pass did.
type Result struct {
	Unneeded   int
	InCooldown bool
	Empty      []string // removal started
	Drained    string   // drain started
}

// Started reports whether any removal started.
func (r Result) Started() bool { return len(r.Empty) > 0 || r.Drained != "" }

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
	if !s.lastDelete.IsZero() && now.Sub(s.lastDelete) < s.delayAfterDelete() {
		return fmt.Sprintf("last node deletion %s ago (--scale-down-delay-after-delete=%s)", now.Sub(s.lastDelete).Round(time.Second), s.delayAfterDelete())
	}
	if !s.lastFailure.IsZero() && now.Sub(s.lastFailure) < s.opts.ScaleDownDelayAfterFailure {
		return fmt.Sprintf("last scale-down failure %s ago (--scale-down-delay-after-failure=%s)", now.Sub(s.lastFailure).Round(time.Second), s.opts.ScaleDownDelayAfterFailure)
	}
	return ""
}

// delayAfterDelete is --scale-down-delay-after-delete, or one --scan-interval
// when it is 0, as upstream: loops run sooner than the interval after a
// removal, and must not start another batch each time.
func (s *ScaleDown) delayAfterDelete() time.Duration {
	if s.opts.ScaleDownDelayAfterDelete > 0 {
		return s.opts.ScaleDownDelayAfterDelete
	}
	return s.opts.ScanInterval
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

	empty, drain := s.choose(unneeded, in)
	if len(empty) > 0 {
		names := make([]string, len(empty))
		for i, c := range empty {
			names[i] = c.Node.Name
			s.Planner.Forget(c.Node.Name)
		}
		res.Empty = names
		klog.Infof("Scale-down: removing %d empty node(s): %s", len(empty), strings.Join(names, ", "))
		s.Actuator.DeleteEmpty(ctx, empty)
	}
	if drain != nil {
		res.Drained = drain.Node.Name
		s.Planner.Forget(drain.Node.Name)
		why := "underutilized"
		if drain.Unready {
			why = "unready"
		}
		klog.Infof("Scale-down: removing node %s (%s, %s utilization %.2f, unneeded for %s): %d pod(s) to evict: %s",
			drain.Node.Name, why, resourceLabel(drain.Utilization), drain.Utilization.Utilization,
			in.Now.Sub(drain.Since).Round(time.Second), len(drain.PodsToEvict), podNames(drain.PodsToEvict, 5))
		s.Actuator.Drain(ctx, drain)
	}
	s.observe(in.Now)
	if res.Started() {
		// The delay after delete runs from the start of a removal (and again
		// from its end, see observe), as upstream's does.
		s.lastDelete = in.Now
	}
	return res, nil
}

// choose picks, in Unneeded's order, the empty nodes (up to
// --max-empty-bulk-delete) and at most one node to drain (none while a drain
// runs), keeping every group above its min size and the cluster above
// --cores-total / --memory-total minimums.
func (s *ScaleDown) choose(unneeded []*Candidate, in PlannerInput) ([]*Candidate, *Candidate) {
	minMilliCPU, minMem := s.minimums()
	var totalMilliCPU, totalMem int64
	for _, n := range in.Nodes {
		if in.BeingDeleted[n.Name] || clusterstate.HasToBeDeletedTaint(n) {
			continue
		}
		totalMilliCPU += n.Status.Capacity.Cpu().MilliValue()
		totalMem += n.Status.Capacity.Memory().Value()
	}
	picked := map[string]int{}
	var empty []*Candidate
	var drain *Candidate
	drainBusy := s.Actuator.DrainInProgress()
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
			klog.V(2).Infof("Scale-down: node %s unneeded for %s of %s", c.Node.Name, d.Round(time.Second), threshold)
			continue
		}
		if c.Empty && len(empty) >= s.opts.MaxEmptyBulkDelete {
			klog.V(2).Infof("Scale-down: node %s waits: %d empty nodes already go this loop (--max-empty-bulk-delete)", c.Node.Name, len(empty))
			continue
		}
		if !c.Empty && (drain != nil || drainBusy) {
			klog.V(2).Infof("Scale-down: node %s waits: another node is being drained", c.Node.Name)
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
			klog.V(2).Infof("Scale-down: node %s unneeded but node group %s would go below its min size %d", c.Node.Name, c.GroupID, gs.Group.MinSize())
			continue
		}
		cpu, mem := c.Node.Status.Capacity.Cpu().MilliValue(), c.Node.Status.Capacity.Memory().Value()
		if totalMilliCPU-cpu < minMilliCPU || totalMem-mem < minMem {
			klog.V(2).Infof("Scale-down: node %s unneeded but the cluster would go below its minimum cores/memory", c.Node.Name)
			metrics.RegisterSkippedScaleDown(map[bool]string{true: metrics.SkippedCPUResourceLimit, false: metrics.SkippedMemoryResourceLimit}[totalMilliCPU-cpu < minMilliCPU])
			continue
		}
		totalMilliCPU -= cpu
		totalMem -= mem
		picked[c.GroupID]++
		if c.Empty {
			empty = append(empty, c)
		} else {
			drain = c
		}
	}
	return empty, drain
}

// minimums merges the provider's limiter with --cores-total/--memory-total
// minimums (the larger wins).
func (s *ScaleDown) minimums() (milliCPU, mem int64) {
	milliCPU, mem = s.opts.MinCoresTotal*1000, s.opts.MinMemoryTotal
	if rl, err := s.provider.GetResourceLimiter(); err == nil && rl != nil {
		if m := rl.GetMin(cloudprovider.ResourceNameCores) * 1000; m > milliCPU {
			milliCPU = m
		}
		if m := rl.GetMin(cloudprovider.ResourceNameMemory); m > mem {
			mem = m
		}
	}
	return
}
