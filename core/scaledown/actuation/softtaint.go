package actuation

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// SoftTaintBudget bounds one pass of soft tainting, as upstream's
// --max-bulk-soft-taint-count and --max-bulk-soft-taint-time do: at most
// Count nodes are tainted or untainted, and none once Time has passed since
// the pass started. A Count of 0 turns soft tainting off.
type SoftTaintBudget struct {
	Count int
	Time  time.Duration
}

// softTaintWorkers bounds the soft-taint calls in flight at once. The
// client's QPS limiter paces them; running them together only keeps a pass
// from waiting for each round trip in turn.
const softTaintWorkers = 10

// softTaintCall is one node to taint or untaint, and its outcome.
type softTaintCall struct {
	node    *apiv1.Node
	untaint bool
	started bool
	err     error
}

// UpdateSoftTaints puts upstream's DeletionCandidateOfClusterAutoscaler
// taint (effect PreferNoSchedule) on unneeded nodes and takes it off the
// needed ones, so that the scheduler prefers other nodes for new pods and an
// unneeded node empties sooner, while nothing is ever kept off it. As
// upstream, the needed nodes come first, nodes carrying
// ToBeDeletedByClusterAutoscaler are left alone, and the budget bounds the
// API calls of the pass; the rest waits for the next loop. Unlike upstream,
// which makes the calls one after another, up to softTaintWorkers run at
// once; now is read before each call starts. The result says how long the
// pass took, for the reporter's function-duration metric.
func UpdateSoftTaints(ctx context.Context, kube kubernetes.Interface, unneeded, needed []*apiv1.Node, b SoftTaintBudget, now func() time.Time) (res scaledown.SoftTaintResult) {
	start := now()
	defer func(wall time.Time) { res.Took = time.Since(wall) }(time.Now())
	var calls []*softTaintCall
	for _, n := range needed {
		if !clusterstate.HasToBeDeletedTaint(n) && hasTaint(n, clusterstate.DeletionCandidateTaint) {
			calls = append(calls, &softTaintCall{node: n, untaint: true})
		}
	}
	for _, n := range unneeded {
		if !clusterstate.HasToBeDeletedTaint(n) && !hasTaint(n, clusterstate.DeletionCandidateTaint) {
			calls = append(calls, &softTaintCall{node: n})
		}
	}
	if len(calls) > b.Count {
		res.Skipped = len(calls) - max(b.Count, 0)
		calls = calls[:max(b.Count, 0)]
	}
	runSoftTaintCalls(ctx, kube, calls, func() bool { return now().Sub(start) < b.Time }, start)
	for _, c := range calls {
		switch {
		case !c.started:
			res.Skipped++
		case c.err != nil:
			res.Errors = append(res.Errors, c.err)
			klog.InfoS("Scale-down: updating the soft taint failed", "node", klog.KObj(c.node), "untaint", c.untaint, "err", c.err)
		case c.untaint:
			res.Untainted = append(res.Untainted, c.node.Name)
		default:
			res.Tainted = append(res.Tainted, c.node.Name)
		}
	}
	if res.Skipped > 0 {
		klog.V(4).InfoS("Scale-down: soft taints of some nodes wait for the next loop (--max-bulk-soft-taint-count / --max-bulk-soft-taint-time spent)", "skipped", res.Skipped)
	}
	if len(res.Tainted) > 0 || len(res.Untainted) > 0 {
		klog.V(1).InfoS("Scale-down: soft taints updated", "tainted", res.Tainted, "untainted", res.Untainted)
	}
	return res
}

// runSoftTaintCalls makes the calls with up to softTaintWorkers at once, in
// order; a call whose turn comes when within says the time budget is spent
// is not started.
func runSoftTaintCalls(ctx context.Context, kube kubernetes.Interface, calls []*softTaintCall, within func() bool, taintedAt time.Time) {
	inTurn(calls, softTaintWorkers, within, func(c *softTaintCall) {
		c.started = true
		if c.untaint {
			c.err = cleanDeletionCandidate(ctx, kube, c.node)
		} else {
			c.err = markDeletionCandidate(ctx, kube, c.node, taintedAt)
		}
	})
}

// inTurn runs do for the calls in order, up to workers at once; once
// within says the budget is spent, the calls left are not run.
func inTurn[T any](calls []T, workers int, within func() bool, do func(T)) {
	var (
		mu   sync.Mutex // guards next and within's clock
		next int
		wg   sync.WaitGroup
	)
	take := func() (T, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(calls) || !within() {
			var none T
			return none, false
		}
		next++
		return calls[next-1], true
	}
	for range min(len(calls), workers) {
		wg.Go(func() {
			for c, ok := take(); ok; c, ok = take() {
				do(c)
			}
		})
	}
	wg.Wait()
}

// SoftTaint is UpdateSoftTaints within --max-bulk-soft-taint-count and
// --max-bulk-soft-taint-time. The caller skips it when the count is 0
// (soft tainting off).
func (a *Actuator) SoftTaint(ctx context.Context, unneeded, needed []*apiv1.Node) scaledown.SoftTaintResult {
	return UpdateSoftTaints(ctx, a.deps.Kube, unneeded, needed, SoftTaintBudget{Count: a.opts.MaxBulkSoftTaintCount, Time: a.opts.MaxBulkSoftTaintTime}, a.clock.Now)
}

func hasTaint(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// markDeletionCandidate adds the soft taint, its value the time in Unix
// seconds as upstream writes it. A node gone meanwhile is not an error.
func markDeletionCandidate(ctx context.Context, kube kubernetes.Interface, n *apiv1.Node, now time.Time) error {
	return updateNode(ctx, kube, n, "soft-tainting", func(node *apiv1.Node) bool {
		if clusterstate.HasToBeDeletedTaint(node) || hasTaint(node, clusterstate.DeletionCandidateTaint) {
			return false
		}
		node.Spec.Taints = append(node.Spec.Taints, apiv1.Taint{
			Key:    clusterstate.DeletionCandidateTaint,
			Value:  strconv.FormatInt(now.Unix(), 10),
			Effect: apiv1.TaintEffectPreferNoSchedule,
		})
		return true
	})
}

// cleanDeletionCandidate removes the soft taint and nothing else.
func cleanDeletionCandidate(ctx context.Context, kube kubernetes.Interface, n *apiv1.Node) error {
	return updateNode(ctx, kube, n, "removing the soft taint from", func(node *apiv1.Node) bool {
		if clusterstate.HasToBeDeletedTaint(node) {
			return false // its removal started meanwhile
		}
		keep := node.Spec.Taints[:0:0]
		for _, t := range node.Spec.Taints {
			if t.Key != clusterstate.DeletionCandidateTaint {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(node.Spec.Taints) {
			return false
		}
		node.Spec.Taints = keep
		return true
	})
}

// updateNode applies change to a copy of the node and writes it when change
// says it changed something. The cached node is tried first (its
// resourceVersion makes a stale write fail), then the node is read again on
// each conflict. A node gone meanwhile is not an error.
func updateNode(ctx context.Context, kube kubernetes.Interface, cached *apiv1.Node, what string, change func(*apiv1.Node) bool) error {
	name := cached.Name
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := cached
		cached = nil
		if node == nil || node.ResourceVersion == "" {
			var err error
			if node, err = kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		node = node.DeepCopy()
		if !change(node) {
			return nil
		}
		_, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s node %s: %w", what, name, err)
	}
	return nil
}
