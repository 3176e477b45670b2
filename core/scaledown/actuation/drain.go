package actuation

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Drain removes non-empty nodes: taint, evict their pods through the
// Eviction API, wait for them to go, delete the node. Every node is tainted
// before any drain starts, so pods evicted from one cannot land on another;
// then each node drains in its own goroutine.
func (a *Actuator) Drain(ctx context.Context, cands []*scaledown.UnneededNode) {
	a.started(cands, true)
	tainted, delay := a.markNodes(ctx, cands)
	if len(tainted) > 0 {
		a.deps.Outcomes.RemovalsStarted(scaledown.RemovalStart{Nodes: tainted, Drain: true})
	}
	// One wait for the batch, then each node drains in its own goroutine.
	if len(tainted) == 0 {
		return
	}
	waited := make(chan bool, 1)
	go func() { waited <- a.waitAfterTaint(ctx, delay, names(tainted)) }()
	waitedAfterTaint := sync.OnceValue(func() bool { return <-waited })
	for _, c := range tainted {
		a.run(func() { a.drain(ctx, c, waitedAfterTaint) })
	}
}

// names lists the nodes' names.
func names(nodes []*scaledown.UnneededNode) []string {
	out := make([]string, len(nodes))
	for i, u := range nodes {
		out[i] = u.Node.Name
	}
	return out
}

func (a *Actuator) drain(ctx context.Context, c *scaledown.UnneededNode, waitedAfterTaint func() bool) {
	n := c.Node
	outcome := deletiontracker.Failed
	defer func() { a.deps.Removals.Ended(n.Name, outcome) }()
	if !waitedAfterTaint() {
		a.fail(ctx, n, scaledown.FailedInternal, fmt.Errorf("waiting after the taint: %w", ctx.Err()))
		return
	}

	start := a.clock.Now()
	// Re-read the node's pods from the API server now that it is tainted:
	// the set is final, and nothing bound since the plan is left behind.
	current, err := a.podsOnNode(ctx, n.Name)
	if err != nil {
		a.fail(ctx, n, scaledown.FailedAPICall, fmt.Errorf("listing the node's pods: %w", err))
		return
	}
	// PDBs only say which pods they cover; their budgets are left to the
	// Eviction API, whose refusals are retried.
	var pdbs []*policyv1.PodDisruptionBudget
	if a.deps.PDBs != nil {
		if pdbs, err = a.deps.PDBs(); err != nil {
			a.fail(ctx, n, scaledown.FailedInternal, fmt.Errorf("listing PodDisruptionBudgets: %w", err))
			return
		}
	}
	opts := a.deps.DrainOptions
	opts.BudgetsLeftToEviction = true
	pods, blocking := drain.PodsToMove(a.withoutExpendable(current), pdbs, opts, start)
	if blocking != nil && blocking.Pod != nil {
		a.fail(ctx, n, scaledown.FailedTransient, fmt.Errorf("drain blocked: %s", scaledown.DescribeBlocking(blocking)))
		return
	}
	ds := daemonSetPodsToEvict(current, a.opts.DaemonSetEvictionForOccupiedNodes)
	klog.InfoS("Scale-down: draining node", "node", klog.KObj(n), "nodeGroup", c.GroupID, "unneededSince", c.Since.Format(time.RFC3339),
		"podsToEvict", len(pods), "pods", framework.PodNames(pods, 5), "daemonSetPodsBestEffort", len(ds))

	if err := a.evictByPriority(ctx, n, pods, ds); err != nil {
		a.fail(ctx, n, scaledown.FailedAPICall, err)
		return
	}
	if err := a.waitForDelayDeletion(ctx, n); err != nil {
		a.fail(ctx, n, scaledown.FailedAPICall, err)
		return
	}
	if started, err := a.deleteNodes([]*apiv1.Node{n}); err != nil && !started[n.Name] {
		a.fail(ctx, n, scaledown.FailedCloudProvider, fmt.Errorf("deleting node: %w", err))
		return
	}
	outcome = deletiontracker.Deleted
	a.deps.Outcomes.NodeRemoved(c)
	klog.InfoS("Scale-down: removed node", "node", klog.KObj(n), "nodeGroup", c.GroupID, "podsEvicted", len(pods),
		"took", a.clock.Now().Sub(start).Round(time.Second))
}
