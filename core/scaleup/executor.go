package scaleup

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// executor carries out scale-up plans: it asks the expander for the best
// option and the provider to grow or create its groups, and returns what
// the cloud answered as an Outcome. It records nothing: the Recorder does.
type executor struct {
	opts     config.AutoscalingOptions
	provider cloudprovider.CloudProvider
	strategy expander.Strategy

	mu sync.Mutex
	// creationBlockedUntil: node pool creation is backed off until then
	// after a refused creation (see create).
	creationBlockedUntil time.Time
}

func newExecutor(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, strategy expander.Strategy) *executor {
	return &executor{opts: opts, provider: provider, strategy: strategy}
}

// run grows the best option's groups. When the cloud refuses every group
// of it, the next best option is tried, without the groups that failed.
func (e *executor) run(plan *Plan, in Input) (*Result, *Outcome) {
	res := &Result{}
	out := &Outcome{Now: in.Now, Pending: len(in.Pods), MaxNodesTotal: e.opts.MaxNodesTotal}
	options := plan.Options
	for len(options) > 0 {
		best := e.strategy.BestOption(options)
		if best == nil {
			break
		}
		id := best.NodeGroup.Id()
		att := Attempt{CappedByMaxNodes: plan.CappedByMaxNodes[id], Pods: best.Pods, Why: choice(*best, options)}
		var failed map[string]bool
		var accountLimit bool
		if !best.NodeGroup.Exist() {
			c := e.create(*best, in.Now)
			att.Calls = []Call{c}
			_, accountLimit = cloudprovider.AsAccountLimit(c.Err)
			if su, ok := cloudprovider.AsSizeUnavailable(c.Err); ok {
				// Only this size is out: the others are tried now. The
				// option itself goes whatever its template says.
				options = withoutSize(withoutFailed(options, map[string]bool{id: true}), su.Size)
			} else {
				options = existingOnly(options)
			}
		} else {
			incs := plan.Increases[id]
			if len(incs) > 1 {
				klog.V(2).InfoS("Scale-up: balancing across similar node groups", "nodes", best.NodeCount, "nodeGroups", increaseGroups(incs))
			}
			att.Calls, failed, accountLimit = e.execute(incs, in.Templates, plan.AllOrNothing)
			options = withoutFailed(options, failed)
			for _, c := range att.Calls {
				if su, ok := cloudprovider.AsSizeUnavailable(c.Err); ok {
					options = withoutSize(options, su.Size)
				}
			}
		}
		out.Attempts = append(out.Attempts, att)
		if done := att.Done(); len(done) > 0 {
			res.Increases = done
			return res, out
		}
		if accountLimit {
			// Every other group would get the same answer.
			break
		}
	}
	out.Untried = len(options)
	return res, out
}

// increaseGroups lists the increases' group IDs.
func increaseGroups(incs []Increase) string {
	ids := make([]string, len(incs))
	for i, inc := range incs {
		ids[i] = inc.GroupID
	}
	return strings.Join(ids, ", ")
}

// choice says, for the log, why the option's group was picked.
func choice(best expander.Option, options []expander.Option) string {
	if len(options) == 1 {
		return "the only node group that could help"
	}
	const listed = 5 // at 100 pools a full list made each scale-up line 4 KB
	among := expander.GroupIDs(options[:min(len(options), listed)])
	if len(options) > listed {
		among += fmt.Sprintf(" and %d more", len(options)-listed)
	}
	return fmt.Sprintf("expander chose %s among %d options: %s", best.NodeGroup.Id(), len(options), among)
}

// withoutFailed drops the options of groups whose increase the cloud
// refused: they are backed off now and would fail again.
func withoutFailed(options []expander.Option, failed map[string]bool) []expander.Option {
	var rest []expander.Option
	for _, opt := range options {
		if !failed[opt.NodeGroup.Id()] {
			rest = append(rest, opt)
		}
	}
	return rest
}

// withoutSize drops the options whose nodes are of the given machine type
// (their template's instance-type label): the provider holds it
// unavailable, for every group of it.
func withoutSize(options []expander.Option, size string) []expander.Option {
	return slices.DeleteFunc(slices.Clone(options), func(o expander.Option) bool {
		return o.NodeInfo != nil && o.NodeInfo.Node() != nil && o.NodeInfo.Node().Labels[apiv1.LabelInstanceTypeStable] == size
	})
}

// existingOnly drops the options of groups that do not exist yet.
func existingOnly(options []expander.Option) []expander.Option {
	return slices.DeleteFunc(slices.Clone(options), func(o expander.Option) bool { return !o.NodeGroup.Exist() })
}

// execute asks the cloud for the increases, group by group (atomic: each
// through AtomicIncreaseSize, all of its nodes or none): a refused
// increase does not stop the others, unless the cloud refused it at an
// account-wide limit (accountLimit), which stops them all. A group the
// provider no longer lists fails without a call.
func (e *executor) execute(plan []Increase, templates map[string]*framework.NodeInfo, atomic bool) (calls []Call, failed map[string]bool, accountLimit bool) {
	failed = map[string]bool{}
	groups := map[string]cloudprovider.NodeGroup{}
	for _, g := range e.provider.NodeGroups() {
		groups[g.Id()] = g
	}
	for _, inc := range plan {
		g := groups[inc.GroupID]
		if g == nil {
			failed[inc.GroupID] = true
			continue
		}
		increase := g.IncreaseSize
		if atomic {
			increase = g.AtomicIncreaseSize
		}
		err := increase(inc.To - inc.From)
		calls = append(calls, Call{Increase: inc, Group: g, Template: templates[inc.GroupID], Err: err})
		if err != nil {
			failed[inc.GroupID] = true
		}
		if _, ok := cloudprovider.AsAccountLimit(err); ok {
			return calls, failed, true
		}
	}
	return calls, failed, false
}

// creationPausedUntil is when node pool creation may be tried again after
// a refused one.
func (e *executor) creationPausedUntil() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.creationBlockedUntil
}

func (e *executor) pauseCreation(now time.Time) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.creationBlockedUntil = now.Add(e.opts.InitialNodeGroupBackoffDuration)
	return e.creationBlockedUntil
}

// create makes the chosen not-yet-existing group with the nodes its option
// needs. A refused creation pauses node pool creation as a whole for the
// initial backoff: DigitalOcean's refusals (a pool limit, the token's
// scope, the droplet limit) hold for any size, and trying each size in
// turn would be a storm of refused requests.
func (e *executor) create(best expander.Option, now time.Time) Call {
	g := best.NodeGroup
	c := Call{Increase: Increase{GroupID: g.Id(), To: best.NodeCount}, Group: g, Planned: g, Template: best.NodeInfo}
	var made cloudprovider.NodeGroup
	var err error
	if sc, isSized := g.(cloudprovider.SizedCreator); isSized {
		made, err = sc.CreateWithSize(best.NodeCount)
	} else if made, err = g.Create(); err == nil {
		// Create makes the group at the provider's own initial size.
		if target, terr := made.TargetSize(); terr != nil {
			err = terr
		} else if best.NodeCount > target {
			err = made.IncreaseSize(best.NodeCount - target)
		}
	}
	if err != nil {
		c.Err = err
		if _, ok := cloudprovider.AsSizeUnavailable(err); !ok {
			// A size out of stock says nothing of the others.
			c.CreationPausedUntil = e.pauseCreation(now)
		}
		return c
	}
	c.Group = made
	c.Increase = Increase{GroupID: made.Id(), From: 0, To: best.NodeCount, Max: made.MaxSize()}
	return c
}
