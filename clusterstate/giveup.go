package clusterstate

import (
	"fmt"
	"slices"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

// GiveUpReason says why nodes were given up on.
type GiveUpReason string

const (
	// GiveUpTimeout: the nodes did not register within the group's
	// MaxNodeProvisionTime, or the target promised nodes the cloud never
	// listed for that long.
	GiveUpTimeout GiveUpReason = "timeout"
	// GiveUpCloudError: the cloud reports the instances in error.
	GiveUpCloudError GiveUpReason = "cloudProviderError"
)

// GiveUpPlan is what to give up on in one node group and why. It is a
// value: making it asks the provider nothing and changes nothing (but the
// clock PlanGiveUp keeps). The core carries it out (DeleteNodes, then
// DecreaseTargetSize for what the deletions did not take off) and reports
// the outcome with RecordGiveUp.
type GiveUpPlan struct {
	GroupID string
	Group   cloudprovider.NodeGroup
	// Retry: ask again to delete Instances, given up earlier, that the
	// cloud still lists and counts in the target; nothing else changes.
	Retry bool
	// Instances to give up and delete.
	Instances []cloudprovider.Instance
	// Target: the group's target when planned; Registered: the registered
	// nodes the cloud counts in it, below which the target never goes.
	Target, Registered int
	// Decrease: how far the target should go down, deletions included;
	// never below the registered nodes.
	Decrease int
	Reason   GiveUpReason
	BackOff  bool // a scale-up of ours failed
	Info     BackoffInfo
	Why      string // for the log line
	// RequestTimedOut: the scale-up request is past its deadline and ends
	// with this give-up; TimedOutAfter is the time since it was made.
	RequestTimedOut bool
	TimedOutAfter   time.Duration

	giveUp   bool
	mismatch mismatchClock
}

// PlanGiveUp returns what to give up on in the group now, if anything:
// instances the cloud reports in error (at once), instances that stayed
// unregistered past the group's MaxNodeProvisionTime, scale-up requests
// past their deadline, and a target above the registered and provisioning
// nodes for longer than that time. It keeps the clock of the last case;
// otherwise it changes nothing.
func (r *Registry) PlanGiveUp(id string, now time.Time) (GiveUpPlan, bool) {
	gs := r.groups[id]
	if gs == nil {
		return GiveUpPlan{}, false
	}
	p := planGiveUp(r.giveUpFacts(gs), now)
	switch p.mismatch {
	case mismatchStart:
		r.sizeMismatchSince[id] = now
	case mismatchClear:
		delete(r.sizeMismatchSince, id)
	}
	if !p.giveUp {
		return GiveUpPlan{}, false
	}
	p.GroupID, p.Group, p.Target, p.Registered = id, gs.Group, gs.Target, gs.inTarget
	if p.RequestTimedOut {
		p.TimedOutAfter = now.Sub(r.requests[id].Time)
	}
	return p, true
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

// planGiveUp decides, in this order: a scale-up request past its deadline
// with nodes still missing gives up everything not registered and backs
// off; instances in error are given up at once and back off with the
// cloud's error; instances unregistered past the provision time are given
// up, backing off only when a scale-up of ours is waiting for them; and,
// without a request, a target above the nodes the cloud lists for longer
// than the provision time is lowered to them.
func planGiveUp(f giveUpFacts, now time.Time) GiveUpPlan {
	var p GiveUpPlan
	req := f.Request
	switch {
	case req != nil && now.After(req.ExpectedAddTime) && f.UpcomingUnregistered > 0:
		p.Instances = slices.Concat(f.Errored, f.LongUnregistered, f.Unregistered)
		p.Decrease = f.Target - f.Registered
		p.Reason, p.BackOff = GiveUpTimeout, true
		p.Info = BackoffInfo{ErrorCode: "timeout", ErrorMessage: fmt.Sprintf("%d node(s) did not register within %s", f.UpcomingUnregistered, f.ProvisionTime)}
		p.Why = fmt.Sprintf("scale-up by %d requested at %s timed out: %d node(s) not registered after %s",
			req.Increase, req.Time.Format(time.RFC3339), f.UpcomingUnregistered, f.ProvisionTime)
	case len(f.Errored) > 0:
		p.Instances = slices.Concat(f.Errored, f.LongUnregistered)
		p.Decrease = len(p.Instances)
		p.Reason, p.BackOff = GiveUpCloudError, true
		ei := f.Errored[0].Status.ErrorInfo
		p.Info = BackoffInfo{ErrorCode: ei.ErrorCode, ErrorMessage: ei.ErrorMessage}
		p.Why = fmt.Sprintf("%d instance(s) in error (%s: %s)", len(f.Errored), ei.ErrorCode, ei.ErrorMessage)
	case len(f.LongUnregistered) > 0:
		p.Instances = slices.Concat(f.LongUnregistered)
		p.Decrease = len(p.Instances)
		p.Reason, p.BackOff = GiveUpTimeout, req != nil
		p.Info = BackoffInfo{ErrorCode: "timeout", ErrorMessage: fmt.Sprintf("%d node(s) did not register within %s", len(p.Instances), f.ProvisionTime)}
		p.Why = fmt.Sprintf("%d instance(s) not registered after %s", len(p.Instances), f.ProvisionTime)
	case req == nil && !f.ListFailed && f.UpcomingUnregistered > f.AllUnregistered:
		// The target promises nodes the cloud does not even list; after the
		// provision time, stop waiting for them.
		if !f.MismatchSeen {
			return GiveUpPlan{mismatch: mismatchStart}
		}
		if now.Sub(f.MismatchSince) <= f.ProvisionTime {
			return GiveUpPlan{mismatch: mismatchKeep}
		}
		p.Decrease = f.UpcomingUnregistered - f.AllUnregistered
		p.Reason = GiveUpTimeout
		p.Why = fmt.Sprintf("target %d exceeds registered and provisioning nodes by %d since %s", f.Target, p.Decrease, f.MismatchSince.Format(time.RFC3339))
	default:
		return GiveUpPlan{mismatch: mismatchClear}
	}
	p.giveUp, p.mismatch = true, mismatchClear
	p.Decrease = min(p.Decrease, f.Target-f.Registered)
	p.RequestTimedOut = req != nil && p.Reason == GiveUpTimeout && now.After(req.ExpectedAddTime)
	return p
}

// PlanRetryDelete returns, at most every retryDeleteInterval, a plan to
// delete again instances given up earlier that the cloud still lists and
// still counts in the group's target (as upstream retries deleting failed
// instances every loop): a refused deletion must not leave them, and the
// room they take in the target, forever. Instances outside the target (it
// was lowered instead) are left alone: deleting them would lower the target
// again, below the nodes that run.
func (r *Registry) PlanRetryDelete(id string, now time.Time) (GiveUpPlan, bool) {
	gs := r.groups[id]
	if gs == nil {
		return GiveUpPlan{}, false
	}
	room := gs.Target - gs.inTarget
	if room <= 0 {
		return GiveUpPlan{}, false
	}
	var due []cloudprovider.Instance
	for _, in := range slices.Concat(gs.errored, gs.longUnreg) {
		u := r.unregistered[instanceKey(id, in.Id)]
		if len(due) == room || u == nil || u.gaveUp.IsZero() || now.Sub(u.lastDelete) < retryDeleteInterval {
			continue
		}
		due = append(due, in)
	}
	if len(due) == 0 {
		return GiveUpPlan{}, false
	}
	return GiveUpPlan{GroupID: id, Group: gs.Group, Retry: true, Instances: due,
		Target: gs.Target, Registered: gs.inTarget, giveUp: true}, true
}

// RecordGiveUp records what the core did with a plan: the plan's instances
// are given up (their deletion asked for now), and the group's target is
// the one the core left (target). A give-up also shrinks or ends the
// scale-up request and backs the group off when the plan says a scale-up of
// ours failed. It returns how far the target went down.
func (r *Registry) RecordGiveUp(p GiveUpPlan, target int, now time.Time) int {
	gs := r.groups[p.GroupID]
	if gs == nil {
		return 0
	}
	for _, in := range p.Instances {
		if u := r.unregistered[instanceKey(p.GroupID, in.Id)]; u != nil {
			u.lastDelete = now
			if !p.Retry {
				u.gaveUp = now
			}
		}
	}
	decreased := gs.Target - target
	gs.Target = target
	if p.Retry {
		return decreased
	}
	if req := r.requests[p.GroupID]; req != nil {
		req.Increase -= decreased
		if p.RequestTimedOut || req.Increase <= 0 {
			delete(r.requests, p.GroupID)
		}
	}
	if p.BackOff {
		r.backOff(p.GroupID, string(p.Reason), p.Info, now)
	}
	return decreased
}
