package scaleup

import (
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Recorder turns what a scale-up planned and did into the events,
// metrics, registry updates and health an operator reads (core/report
// implements it). The orchestrator hands it every outcome as soon as the
// executor returns, so that the next decision sees the backoffs it records.
type Recorder interface {
	// ScaleUp records a scale-up for pending pods: the plan, then what
	// the executor did with it.
	ScaleUp(plan *Plan, out *Outcome)
	// ScaleUpToMinSize records the raise of groups below their min size:
	// the groups that could not grow and the calls made for the others.
	ScaleUpToMinSize(skipped []MinSizeSkip, calls []Call, now time.Time)
	// Provisioned records the calls made for nodes no pending pod asked
	// for (Provision: a consolidation's replacement).
	Provisioned(calls []Call, now time.Time)
}

// Outcome is what the executor did with a Plan: the options it tried, in
// order, each with the calls it made to the cloud. It records nothing.
type Outcome struct {
	Now time.Time
	// Pending is how many pods the scale-up was for.
	Pending  int
	Attempts []Attempt
	// Untried is how many options were left when the executor stopped
	// without growing anything (the cloud refused at an account-wide
	// limit, or the expander chose none).
	Untried int
	// MaxNodesTotal is --max-nodes-total, which the events about it name.
	MaxNodesTotal int
	// Took is how long planning and executing took.
	Took time.Duration
}

// ScaledUp reports whether some call grew a group.
func (o *Outcome) ScaledUp() bool {
	for _, a := range o.Attempts {
		if len(a.Done()) > 0 {
			return true
		}
	}
	return false
}

// Attempt is one option the expander chose and the calls made for it.
type Attempt struct {
	// CappedByMaxNodes: --max-nodes-total, not the group's own limits,
	// bounds the option.
	CappedByMaxNodes bool
	// Pods are those the option's new nodes are for.
	Pods []*apiv1.Pod
	// Why says, for the log, why the expander chose it.
	Why   string
	Calls []Call
}

// Done returns the increases the cloud accepted.
func (a Attempt) Done() []Increase {
	var out []Increase
	for _, c := range a.Calls {
		if c.Err == nil {
			out = append(out, c.Increase)
		}
	}
	return out
}

// Call is one request to the cloud: an increase of an existing group, or
// the creation of one the plan chose (Planned).
type Call struct {
	Increase Increase
	// Group is the group asked to grow; after a creation the cloud
	// accepted, the group made.
	Group cloudprovider.NodeGroup
	// Planned is, for a creation, the not-yet-existing group the plan
	// chose (nil for an increase).
	Planned  cloudprovider.NodeGroup
	Template *framework.NodeInfo
	// Err is the cloud's refusal (nil: accepted).
	Err error
	// CreationPausedUntil is, after a refused creation, when node pool
	// creation may be tried again.
	CreationPausedUntil time.Time
}

// Creation reports whether the call created a group.
func (c Call) Creation() bool { return c.Planned != nil }
