// Package scaleup decides which node group grows, and by how much, so that
// pods the scheduler cannot place get nodes: the Planner plans, the
// executor asks the cloud and returns an Outcome, and the Orchestrator
// hands plan and outcome to a Recorder (core/report), which records them.
package scaleup

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Orchestrator runs scale-ups: the Planner decides (planner.go), the
// executor acts (executor.go), the Recorder records the plan and the
// outcome. It alone joins them: the planner never sees the executor.
type Orchestrator struct {
	registry *clusterstate.Registry
	planner  *Planner
	exec     *executor
	recorder Recorder
}

// New returns an orchestrator that hands what it plans and does to
// recorder.
func New(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, registry *clusterstate.Registry,
	strategy expander.Strategy, checker *simulator.PredicateChecker, recorder Recorder) *Orchestrator {
	return &Orchestrator{registry: registry, recorder: recorder,
		planner: NewPlanner(opts, provider, registry, checker),
		exec:    newExecutor(opts, provider, strategy),
	}
}

// Input is what one scale-up looks at.
type Input struct {
	// Snapshot holds the registered nodes (minus those being deleted) and
	// the upcoming template nodes, with pods that fit already placed.
	Snapshot *simulator.ClusterSnapshot
	// Pods are pending pods that fit neither existing nor upcoming nodes.
	Pods []*apiv1.Pod
	// Quotas counts the live registered nodes against the cluster-wide
	// limits; the scale-up adds the nodes still coming up.
	Quotas resourcequotas.Tracker
	// Templates per group id, and why some groups have none.
	Templates      map[string]*framework.NodeInfo
	TemplateErrors map[string]error
	// DaemonSets start pods on new nodes; templates of node groups that do
	// not exist yet are built with them.
	DaemonSets []*appsv1.DaemonSet
	Now        time.Time
	// AllOrNothing (a best-effort-atomic ProvisioningRequest's pods): only
	// an option that places every pod counts, in one group (no balancing),
	// grown with the provider's AtomicIncreaseSize.
	AllOrNothing bool
}

// Result says what a scale-up did, for the loop: which groups grew. What
// happened to each pod and each call is the Outcome the recorder gets.
type Result struct {
	Increases []Increase
}

// ScaledUp reports whether any group grew.
func (r *Result) ScaledUp() bool { return len(r.Increases) > 0 }

// computePlan has the planner plan in, with the executor's pause of node
// pool creation.
func (o *Orchestrator) computePlan(in Input) *Plan {
	return o.planner.computePlan(planInput{Input: in, CreationPausedUntil: o.exec.creationPausedUntil()})
}

// ScaleUp plans the scale-up for in.Pods, has the executor grow the best
// option's groups (and, with --balance-similar-node-groups, the groups like
// it) and the recorder record both.
func (o *Orchestrator) ScaleUp(in Input) (*Result, error) {
	if len(in.Pods) == 0 {
		return &Result{}, nil
	}
	start := time.Now()
	for round := 0; ; round++ {
		plan := o.computePlan(in)
		res, out := o.exec.run(plan, in)
		out.Took = time.Since(start)
		if !res.ScaledUp() && sizeRefused(out) && round < maxSizeReplans {
			// A size the cloud has no capacity for: the provider now
			// holds it unavailable, and this loop plans again without
			// it (the next cheapest size of a pool on demand is only
			// planned then). The refused calls are recorded; the pods
			// are told why at the last round.
			o.recorder.ScaleUp(&Plan{Increases: plan.Increases, CappedByMaxNodes: plan.CappedByMaxNodes, EstimateTimes: plan.EstimateTimes}, out)
			continue
		}
		o.recorder.ScaleUp(plan, out)
		return res, nil
	}
}

// maxSizeReplans bounds the plans one scale-up makes again after sizes
// refused for capacity: each round costs one refused request at most.
const maxSizeReplans = 3

// sizeRefused reports whether a call of the outcome met a size the cloud
// has no capacity for (cloudprovider.SizeUnavailableError).
func sizeRefused(out *Outcome) bool {
	for _, a := range out.Attempts {
		for _, c := range a.Calls {
			if _, ok := cloudprovider.AsSizeUnavailable(c.Err); ok {
				return true
			}
		}
	}
	return false
}

// ScaleUpToMinSize raises the groups below their min size to it
// (--enforce-node-group-min-size; see planMinSize) and returns the
// increases made. quotas counts the live registered nodes.
func (o *Orchestrator) ScaleUpToMinSize(quotas resourcequotas.Tracker, templates map[string]*framework.NodeInfo, now time.Time) []Increase {
	groups := o.registry.NodeGroups()
	quotas = quotas.WithUpcoming(groups, templateNode(templates))
	plan, skipped := o.planner.planMinSize(groups, templates, quotas, now)
	var calls []Call
	if len(plan) > 0 {
		calls, _, _ = o.exec.execute(plan, templates, false)
	}
	o.recorder.ScaleUpToMinSize(skipped, calls, now)
	return Attempt{Calls: calls}.Done()
}
