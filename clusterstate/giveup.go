package clusterstate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// GiveUp describes nodes the registry stopped waiting for in one group.
type GiveUp struct {
	GroupID   string
	Reason    string // metrics reason: timeout or cloudProviderError
	Instances []string
	Decreased int // how much the target went down
	BackedOff bool
	// Deleting: the instances whose deletion was asked for; DeleteErr is nil
	// when the provider deleted them.
	Deleting  []cloudprovider.Instance
	DeleteErr error
	// Retried: a new attempt to delete instances given up earlier that the
	// cloud still lists; nothing else changed.
	Retried bool
	// TimedOutAfter: set when a scale-up request timed out, the time since
	// it was made.
	TimedOutAfter time.Duration
}

// FixNodeGroupSizes gives up on nodes that will not come: instances the
// cloud reports in error (at once), instances that stayed unregistered past
// the group's MaxNodeProvisionTime, scale-up requests past their deadline,
// and targets above the registered and provisioning nodes for longer than
// that time. It deletes such instances when the provider can, lowers the
// target for the rest (never below the registered nodes), and backs the
// group off when a scale-up of ours failed. The caller should then run
// UpdateNodes again before scaling up.
func (r *Registry) FixNodeGroupSizes(now time.Time) ([]GiveUp, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []GiveUp
	var errs []string
	for _, id := range r.groupOrder {
		gs := r.groups[id]
		if gu := r.retryDeletes(gs, now); gu != nil {
			out = append(out, *gu)
		}
		gu, err := r.fixGroup(gs, now)
		if err != nil {
			errs = append(errs, err.Error())
		}
		if gu != nil {
			out = append(out, *gu)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("fixing node group sizes: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// fixGroup gives up on what will not come in one group: planGiveUp
// decides, applyGiveUp acts.
func (r *Registry) fixGroup(gs *groupState, now time.Time) (*GiveUp, error) {
	id := gs.Group.Id()
	p := planGiveUp(r.giveUpFacts(gs), now)
	switch p.Mismatch {
	case mismatchStart:
		r.sizeMismatchSince[id] = now
	case mismatchClear:
		delete(r.sizeMismatchSince, id)
	}
	if !p.GiveUp {
		return nil, nil
	}
	return r.applyGiveUp(gs, p, now)
}

// giveUpFacts is what planGiveUp looks at in one group. Instance lists hold
// only instances not given up yet.
type giveUpFacts struct {
	Target int
	// Registered: registered nodes the cloud counts in the target; the
	// target never goes below them.
	Registered           int
	UpcomingUnregistered int
	ProvisionTime        time.Duration
	ListFailed           bool            // the group's instances could not be listed
	Request              *ScaleUpRequest // nil: no scale-up of ours in progress
	Errored              []cloudprovider.Instance
	LongUnregistered     []cloudprovider.Instance
	Unregistered         []cloudprovider.Instance
	// AllUnregistered: instances without a Node still within the
	// provision time, given up or not: the cloud lists them, so the target
	// does not promise more than it delivers by them.
	AllUnregistered int
	// MismatchSince: since when the target has promised nodes the cloud
	// does not list (MismatchSeen false: it did not last time).
	MismatchSince time.Time
	MismatchSeen  bool
}

func (r *Registry) giveUpFacts(gs *groupState) giveUpFacts {
	id := gs.Group.Id()
	since, seen := r.sizeMismatchSince[id]
	return giveUpFacts{
		Target: gs.Target, Registered: gs.inTarget, UpcomingUnregistered: gs.UpcomingUnregistered,
		ProvisionTime: gs.Options.MaxNodeProvisionTime, ListFailed: gs.nodesErr != nil, Request: r.requests[id],
		Errored: r.notGivenUp(id, gs.errored), LongUnregistered: r.notGivenUp(id, gs.longUnreg),
		Unregistered: r.notGivenUp(id, gs.unregistered), AllUnregistered: len(gs.unregistered),
		MismatchSince: since, MismatchSeen: seen,
	}
}

// mismatchClock is what a plan does with the time since which the target
// has promised more nodes than the cloud lists.
type mismatchClock int

const (
	mismatchClear mismatchClock = iota // no mismatch, or given up on it
	mismatchStart                      // first seen now
	mismatchKeep                       // still within the provision time
)

// giveUpPlan is what to give up on in one group and why. It is a value:
// making it asks the provider nothing and changes nothing.
type giveUpPlan struct {
	GiveUp   bool
	Mismatch mismatchClock
	// Instances to give up and delete.
	Instances []cloudprovider.Instance
	// Decrease: how far the target should go down, deletions included;
	// never below the registered nodes.
	Decrease int
	Reason   string // metrics reason: timeout or cloudProviderError
	BackOff  bool   // a scale-up of ours failed
	Info     BackoffInfo
	Why      string // for the log line
	// RequestTimedOut: the scale-up request is past its deadline and ends
	// with this give-up.
	RequestTimedOut bool
}

// planGiveUp decides, in this order: a scale-up request past its deadline
// with nodes still missing gives up everything not registered and backs
// off; instances in error are given up at once and back off with the
// cloud's error; instances unregistered past the provision time are given
// up, backing off only when a scale-up of ours is waiting for them; and,
// without a request, a target above the nodes the cloud lists for longer
// than the provision time is lowered to them.
func planGiveUp(f giveUpFacts, now time.Time) giveUpPlan {
	var p giveUpPlan
	req := f.Request
	switch {
	case req != nil && now.After(req.ExpectedAddTime) && f.UpcomingUnregistered > 0:
		p.Instances = slices.Concat(f.Errored, f.LongUnregistered, f.Unregistered)
		p.Decrease = f.Target - f.Registered
		p.Reason, p.BackOff = metrics.FailedScaleUpTimeout, true
		p.Info = BackoffInfo{ErrorCode: "timeout", ErrorMessage: fmt.Sprintf("%d node(s) did not register within %s", f.UpcomingUnregistered, f.ProvisionTime)}
		p.Why = fmt.Sprintf("scale-up by %d requested at %s timed out: %d node(s) not registered after %s",
			req.Increase, req.Time.Format(time.RFC3339), f.UpcomingUnregistered, f.ProvisionTime)
	case len(f.Errored) > 0:
		p.Instances = slices.Concat(f.Errored, f.LongUnregistered)
		p.Decrease = len(p.Instances)
		p.Reason, p.BackOff = metrics.FailedScaleUpCloudProviderError, true
		ei := f.Errored[0].Status.ErrorInfo
		p.Info = BackoffInfo{ErrorCode: ei.ErrorCode, ErrorMessage: ei.ErrorMessage}
		p.Why = fmt.Sprintf("%d instance(s) in error (%s: %s)", len(f.Errored), ei.ErrorCode, ei.ErrorMessage)
	case len(f.LongUnregistered) > 0:
		p.Instances = slices.Concat(f.LongUnregistered)
		p.Decrease = len(p.Instances)
		p.Reason, p.BackOff = metrics.FailedScaleUpTimeout, req != nil
		p.Info = BackoffInfo{ErrorCode: "timeout", ErrorMessage: fmt.Sprintf("%d node(s) did not register within %s", len(p.Instances), f.ProvisionTime)}
		p.Why = fmt.Sprintf("%d instance(s) not registered after %s", len(p.Instances), f.ProvisionTime)
	case req == nil && !f.ListFailed && f.UpcomingUnregistered > f.AllUnregistered:
		// The target promises nodes the cloud does not even list; after the
		// provision time, stop waiting for them.
		if !f.MismatchSeen {
			return giveUpPlan{Mismatch: mismatchStart}
		}
		if now.Sub(f.MismatchSince) <= f.ProvisionTime {
			return giveUpPlan{Mismatch: mismatchKeep}
		}
		p.Decrease = f.UpcomingUnregistered - f.AllUnregistered
		p.Reason = metrics.FailedScaleUpTimeout
		p.Why = fmt.Sprintf("target %d exceeds registered and provisioning nodes by %d since %s", f.Target, p.Decrease, f.MismatchSince.Format(time.RFC3339))
	default:
		return giveUpPlan{Mismatch: mismatchClear}
	}
	p.GiveUp, p.Mismatch = true, mismatchClear
	p.Decrease = min(p.Decrease, f.Target-f.Registered)
	p.RequestTimedOut = req != nil && p.Reason == metrics.FailedScaleUpTimeout && now.After(req.ExpectedAddTime)
	return p
}

// applyGiveUp carries a plan out: it marks the instances given up, asks
// the provider to delete them, lowers the target for what the deletions
// did not take off, shrinks or ends the scale-up request and backs the
// group off when the plan says a scale-up of ours failed.
func (r *Registry) applyGiveUp(gs *groupState, p giveUpPlan, now time.Time) (*GiveUp, error) {
	id := gs.Group.Id()
	gu := &GiveUp{GroupID: id, Reason: p.Reason, BackedOff: p.BackOff}
	req := r.requests[id]
	if p.RequestTimedOut {
		gu.TimedOutAfter = now.Sub(req.Time)
	}
	metrics.RegisterFailedNodeCreations(p.Reason, p.Decrease)
	for _, in := range p.Instances {
		gu.Instances = append(gu.Instances, in.Id)
		r.unregistered[instanceKey(id, in.Id)].gaveUp = now
	}
	klog.Warningf("Node group %s: giving up on %d node(s): %s", id, p.Decrease, p.Why)

	deleted := r.deleteInstances(gs, p.Instances, gu, now)
	if deleted == 0 && len(p.Instances) > 0 {
		klog.Warningf("Node group %s: lowering the target instead", id)
	}
	target, err := lowerTarget(gs, p.Decrease, deleted)
	gu.Decreased = gs.Target - target
	gs.Target = target

	if req != nil {
		req.Increase -= gu.Decreased
		if p.RequestTimedOut || req.Increase <= 0 {
			delete(r.requests, id)
		}
	}
	if p.BackOff {
		r.failedLocked(id, p.Reason, p.Info, now)
	} else {
		metrics.RegisterFailedScaleUp(p.Reason, "", "")
	}
	return gu, err
}

// lowerTarget lowers the group's target by the part of decrease that
// deleting instances did not take off, never below its registered nodes,
// and returns the target it leaves. It starts from the cloud's own target
// after the deletions when the provider can say it. The error is returned,
// not logged: FixNodeGroupSizes' caller logs it.
func lowerTarget(gs *groupState, decrease, deleted int) (int, error) {
	id := gs.Group.Id()
	target := gs.Target - deleted
	if t, err := gs.Group.TargetSize(); err == nil {
		target = t
	}
	rest := min(decrease-deleted, target-gs.inTarget)
	if rest <= 0 {
		return target, nil
	}
	if err := gs.Group.DecreaseTargetSize(-rest); err != nil {
		return target, fmt.Errorf("node group %s: decrease target by %d: %w", id, rest, err)
	}
	klog.Infof("Node group %s: target lowered from %d to %d", id, target, target-rest)
	return target - rest, nil
}

// deleteInstances asks the provider to delete instances that have no Node,
// records the attempt in gu and returns how many were deleted.
func (r *Registry) deleteInstances(gs *groupState, instances []cloudprovider.Instance, gu *GiveUp, now time.Time) int {
	if len(instances) == 0 {
		return 0
	}
	id := gs.Group.Id()
	// DeleteNodes takes Node objects: build placeholders carrying the
	// provider ID, marked as such so the provider can match them by it.
	fake := make([]*apiv1.Node, 0, len(instances))
	names := make([]string, 0, len(instances))
	for _, in := range instances {
		if u := r.unregistered[instanceKey(id, in.Id)]; u != nil {
			u.lastDelete = now
		}
		n := &apiv1.Node{}
		n.Name = in.Id
		n.Spec.ProviderID = in.Id
		reason := cloudprovider.FakeNodeUnregistered
		if in.Status != nil && in.Status.ErrorInfo != nil {
			reason = cloudprovider.FakeNodeCreateError
		}
		n.Annotations = map[string]string{cloudprovider.FakeNodeReasonAnnotation: reason}
		fake = append(fake, n)
		names = append(names, in.Id)
	}
	gu.Deleting = instances
	if err := gs.Group.DeleteNodes(fake); err != nil {
		gu.DeleteErr = err
		klog.Warningf("Node group %s: cannot delete %d instance(s) without a Node (%s): %v", id, len(fake), strings.Join(names, ", "), err)
		return 0
	}
	klog.Infof("Node group %s: deleted instance(s) without a Node %s", id, strings.Join(names, ", "))
	return len(fake)
}

// retryDeletes asks again, at most every retryDeleteInterval, to delete
// instances given up earlier that the cloud still lists and still counts in
// the group's target (as upstream retries deleting failed instances every
// loop): a refused deletion must not leave them, and the room they take in
// the target, forever. Instances outside the target (it was lowered
// instead) are left alone: deleting them would lower the target again,
// below the nodes that run.
func (r *Registry) retryDeletes(gs *groupState, now time.Time) *GiveUp {
	id := gs.Group.Id()
	room := gs.Target - gs.inTarget
	if room <= 0 {
		return nil
	}
	var due []cloudprovider.Instance
	for _, in := range append(append([]cloudprovider.Instance(nil), gs.errored...), gs.longUnreg...) {
		u := r.unregistered[instanceKey(id, in.Id)]
		if len(due) == room || u == nil || u.gaveUp.IsZero() || now.Sub(u.lastDelete) < retryDeleteInterval {
			continue
		}
		due = append(due, in)
	}
	if len(due) == 0 {
		return nil
	}
	gu := &GiveUp{GroupID: id, Retried: true}
	for _, in := range due {
		gu.Instances = append(gu.Instances, in.Id)
	}
	klog.V(1).Infof("Node group %s: asking again to delete %d given-up instance(s) the cloud still lists", id, len(due))
	deleted := r.deleteInstances(gs, due, gu, now)
	if t, err := gs.Group.TargetSize(); err == nil {
		gu.Decreased = gs.Target - t
		gs.Target = t
	} else {
		gs.Target -= deleted
		gu.Decreased = deleted
	}
	return gu
}
