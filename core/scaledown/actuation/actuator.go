// Package actuation removes the nodes scale-down chose: it taints them
// ToBeDeletedByClusterAutoscaler, evicts their pods (drain) or checks they
// are still empty, asks the provider to delete them, and gives a node back
// (taint removed) when its removal fails. Every removal is reported to the
// deletion tracker when it starts and when it ends, and each of its steps
// to Outcomes (the reporter), which records it: the actuator itself
// records no event or metric.
package actuation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// PodEvictionHeadroom is added to --max-graceful-termination-sec when
// waiting for evicted pods to disappear (kubelet needs a moment after the
// grace period to report the pod gone).
const PodEvictionHeadroom = 30 * time.Second

// Actuator removes nodes: taint, evict, delete. Drains run in goroutines so
// the loop is not blocked; nodes being removed are tracked so the planner
// and scale-up leave them alone.
type Actuator struct {
	opts config.AutoscalingOptions
	deps Deps

	clock                 clock.PassiveClock
	evictionRetryInterval time.Duration
	podGoneCheckInterval  time.Duration
	async                 bool
	// onDelayAfterTaint, when set, hears each wait after tainting.
	onDelayAfterTaint func(time.Duration)
	latencies         latencies

	wg sync.WaitGroup
}

// Deps is what the actuator needs from the rest of the autoscaler.
type Deps struct {
	Kube     kubernetes.Interface
	Provider cloudprovider.CloudProvider
	// Outcomes hears each step of each removal as it happens (the
	// reporter's scale-down case).
	Outcomes scaledown.Outcomes
	// DrainOptions are the drain rules, as the planner's, for the final
	// check of a node's pods before it is drained.
	DrainOptions drain.Options
	// PDBs lists the cluster's PodDisruptionBudgets, for the final check:
	// a kube-system pod covered by one may be evicted.
	PDBs func() ([]*policyv1.PodDisruptionBudget, error)
	// Removals is told of every removal's start and end.
	Removals *deletiontracker.Tracker
	// Nodes reads nodes from the informer: their delay-deletion
	// annotations, and how soon a taint shows there.
	Nodes corelisters.NodeLister
	// Pods reads pods from the informer, for the check that an empty node
	// is still empty (see cachedPods); nil: the API server is asked.
	Pods corelisters.PodLister
	// GroupGone, when set, hears of a group that no longer exists after
	// DeleteNodes took its nodes: the provider deleted the whole group
	// in their place (a DOKS pool node autoprovisioning created).
	GroupGone func(cloudprovider.NodeGroup)
}

// Option changes how an actuator paces its work.
type Option func(*Actuator)

// WithPacing sets how often a refused eviction is retried and how often an
// evicted pod is checked for being gone (5s each by default).
func WithPacing(evictionRetry, podGoneCheck time.Duration) Option {
	return func(a *Actuator) { a.evictionRetryInterval, a.podGoneCheckInterval = evictionRetry, podGoneCheck }
}

// OnDelayAfterTaint calls f with each wait between tainting nodes and
// checking and deleting them, as it starts.
func OnDelayAfterTaint(f func(time.Duration)) Option {
	return func(a *Actuator) { a.onDelayAfterTaint = f }
}

// Synchronous runs each removal in the caller's goroutine instead of its
// own, so that its outcome is known when DeleteEmpty or Drain returns.
func Synchronous() Option { return func(a *Actuator) { a.async = false } }

// New returns an actuator.
func New(opts config.AutoscalingOptions, deps Deps, options ...Option) *Actuator {
	a := &Actuator{
		opts: opts, deps: deps,
		clock: clock.RealClock{}, evictionRetryInterval: 5 * time.Second, podGoneCheckInterval: 5 * time.Second, async: true,
	}
	for _, o := range options {
		o(a)
	}
	return a
}

// Wait blocks until running deletions end.
func (a *Actuator) Wait() { a.wg.Wait() }

func (a *Actuator) run(f func()) {
	a.wg.Add(1)
	if a.async {
		go func() { defer a.wg.Done(); f() }()
		return
	}
	defer a.wg.Done()
	f()
}

// started reports the removals' start to the tracker.
func (a *Actuator) started(nodes []*scaledown.UnneededNode, drain bool) {
	for _, u := range nodes {
		a.deps.Removals.Started(u.Node.Name, u.GroupID, drain)
	}
}

// fail undoes a removal: the taint goes, the node stays, and the failure
// starts --scale-down-delay-after-failure.
func (a *Actuator) fail(ctx context.Context, n *apiv1.Node, kind scaledown.FailureKind, err error) {
	klog.ErrorS(err, "Scale-down: removing node failed; keeping it", "node", klog.KObj(n))
	// Not cancelled with ctx: a removal cut short by shutdown still gives
	// its node back.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, uerr := UnmarkToBeDeleted(uctx, a.deps.Kube, n.Name, a.opts.CordonNodeBeforeTerminate); uerr != nil {
		klog.ErrorS(uerr, "Scale-down: giving the node back failed", "node", klog.KObj(n))
	}
	a.deps.Outcomes.RemovalFailed(scaledown.RemovalFailure{Node: n, Kind: kind, Err: err})
}

// DeleteEmpty removes nodes running only DaemonSet and mirror pods, in bulk:
// taint them all, check they are still empty, then one DeleteNodes call per
// group. The taints are written before it returns, as upstream's
// taintNodesSync and Drain write theirs: the loop's soft taints, which come
// after, then cannot take the client's QPS budget ahead of the batch's
// taints and hold its delay after taint back by seconds.
func (a *Actuator) DeleteEmpty(ctx context.Context, nodes []*scaledown.UnneededNode) {
	if len(nodes) == 0 {
		return
	}
	a.started(nodes, false)
	a.deps.Outcomes.RemovalsStarted(scaledown.RemovalStart{Nodes: nodes})
	tainted, delay := a.markNodes(ctx, nodes)
	if len(tainted) == 0 {
		return
	}
	a.run(func() { a.deleteEmpty(ctx, tainted, delay) })
}

// deleteEmpty waits the delay after taint, prepares each tainted node (check
// still empty, evict its DaemonSet pods, wait for its delay-deletion
// annotations), then deletes the prepared ones group by group. The tracker
// hears every outcome once the whole batch is done.
func (a *Actuator) deleteEmpty(ctx context.Context, tainted []*scaledown.UnneededNode, delay time.Duration) {
	outcomes := make(map[string]deletiontracker.Outcome, len(tainted))
	defer func() {
		for _, u := range tainted {
			a.deps.Removals.Ended(u.Node.Name, outcomes[u.Node.Name])
		}
	}()
	if !a.waitAfterTaint(ctx, delay, names(tainted)) {
		for _, u := range tainted {
			a.fail(ctx, u.Node, scaledown.FailedInternal, ctx.Err())
			outcomes[u.Node.Name] = deletiontracker.Failed
		}
		return
	}
	cached := a.cachedPods(tainted)
	var mu sync.Mutex
	var ready []*scaledown.UnneededNode
	var wg sync.WaitGroup
	// In parallel: a node's delay-deletion wait must not hold the others.
	for _, u := range tainted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pods, fresh := cached[u.Node.Name]
			outcome, ok := a.prepareEmpty(ctx, u, pods, fresh)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				ready = append(ready, u)
			} else {
				outcomes[u.Node.Name] = outcome
			}
		}()
	}
	wg.Wait()
	// Deleted in the order planned.
	slices.SortFunc(ready, func(x, y *scaledown.UnneededNode) int {
		return slices.Index(tainted, x) - slices.Index(tainted, y)
	})
	for _, group := range byGroup(ready) {
		for name, outcome := range a.deleteGroup(ctx, group) {
			outcomes[name] = outcome
		}
	}
}

// prepareEmpty checks a tainted empty node is still empty, evicts its
// DaemonSet pods (best effort) and waits for its delay-deletion
// annotations. pods are the node's pods from the cache when cached says
// the cache could answer (see cachedPods); otherwise the API server is
// asked. When the node is not to be deleted it returns why the removal
// ended, and false.
func (a *Actuator) prepareEmpty(ctx context.Context, u *scaledown.UnneededNode, pods []*apiv1.Pod, cached bool) (deletiontracker.Outcome, bool) {
	// A pod may have been bound since the simulation. With the taint on
	// (and seen by the scheduler after the delay after taint), nothing
	// new can arrive, so the answer is final. No drain rules apply: any
	// pod to move or blocking one means a pod arrived, so the node is not
	// empty either way.
	if !cached {
		var err error
		if pods, err = a.podsOnNode(ctx, u.Node.Name); err != nil {
			a.fail(ctx, u.Node, scaledown.FailedAPICall, fmt.Errorf("checking the node is still empty: %w", err))
			return deletiontracker.Failed, false
		}
	}
	if toMove, blocking := drain.PodsToMove(a.withoutExpendable(pods), nil, drain.Options{}, a.clock.Now()); len(toMove) > 0 || blocking != nil {
		klog.InfoS("Scale-down: node is no longer empty; not removing it", "node", klog.KObj(u.Node), "arrived", arrivedPods(toMove, blocking))
		if _, err := UnmarkToBeDeleted(ctx, a.deps.Kube, u.Node.Name, a.opts.CordonNodeBeforeTerminate); err != nil {
			klog.ErrorS(err, "Scale-down: giving the node back failed", "node", klog.KObj(u.Node))
		}
		return deletiontracker.Kept, false
	}
	// Best effort, as upstream: the node goes whatever the answers. Each
	// DaemonSet pod gets its own drain priority group's grace period, the
	// groups lowest first, as upstream's EvictDaemonSetPods does.
	ds := daemonSetPodsToEvict(pods, a.opts.DaemonSetEvictionForEmptyNodes)
	groups := a.opts.DrainGroups()
	for i, g := range groups {
		a.evictBestEffort(ctx, u.Node, slices.DeleteFunc(slices.Clone(ds), func(p *apiv1.Pod) bool { return drainGroupOf(p, groups) != i }), g.GracePeriodSeconds)
	}
	if err := a.waitForDelayDeletion(ctx, u.Node); err != nil {
		a.fail(ctx, u.Node, scaledown.FailedAPICall, err)
		return deletiontracker.Failed, false
	}
	return deletiontracker.Deleted, true
}

// byGroup splits nodes by node group, in the order the groups first appear.
func byGroup(nodes []*scaledown.UnneededNode) [][]*scaledown.UnneededNode {
	index := map[string]int{}
	var out [][]*scaledown.UnneededNode
	for _, u := range nodes {
		i, ok := index[u.GroupID]
		if !ok {
			i = len(out)
			index[u.GroupID] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], u)
	}
	return out
}

// deleteGroup asks the provider to delete one group's prepared nodes in one
// call, gives back those it did not delete when it fails, and records the
// removed ones. It returns each node's outcome.
func (a *Actuator) deleteGroup(ctx context.Context, group []*scaledown.UnneededNode) map[string]deletiontracker.Outcome {
	outcomes := make(map[string]deletiontracker.Outcome, len(group))
	nodes := make([]*apiv1.Node, len(group))
	for i, u := range group {
		nodes[i] = u.Node
	}
	started, err := a.deleteNodes(nodes)
	var gone []*scaledown.UnneededNode
	for _, u := range group {
		// The group may have deleted some before failing: those keep their
		// taint, or pods would be scheduled onto a node going away.
		if err != nil && !started[u.Node.Name] {
			a.fail(ctx, u.Node, scaledown.FailedCloudProvider, err)
			outcomes[u.Node.Name] = deletiontracker.Failed
			continue
		}
		outcomes[u.Node.Name] = deletiontracker.Deleted
		gone = append(gone, u)
		a.deps.Outcomes.NodeRemoved(u)
	}
	if len(gone) > 0 {
		names := make([]string, len(gone))
		for i, u := range gone {
			names[i] = u.Node.Name
		}
		klog.InfoS("Scale-down: removed empty nodes", "nodes", strings.Join(names, ", "), "nodeGroup", group[0].GroupID)
	}
	return outcomes
}

// deleteNodes asks the nodes' group to delete them (all from one group).
// When DeleteNodes fails, deleted names the nodes the group deleted before
// failing: those it lists as deleting, or no longer lists though it did
// before the call. The same group object is asked before and after.
func (a *Actuator) deleteNodes(nodes []*apiv1.Node) (deleted map[string]bool, err error) {
	g, err := a.deps.Provider.NodeGroupForNode(nodes[0])
	if err != nil {
		return nil, fmt.Errorf("node group of %s: %w", nodes[0].Name, err)
	}
	if g == nil {
		return nil, fmt.Errorf("node %s belongs to no node group", nodes[0].Name)
	}
	before, _ := g.Nodes() // nil on error: then only "deleting" counts
	err = g.DeleteNodes(nodes)
	if err == nil {
		if !g.Exist() && a.deps.GroupGone != nil {
			a.deps.GroupGone(g)
		}
		return nil, nil
	}
	after, lerr := g.Nodes()
	if lerr != nil {
		klog.InfoS("Scale-down: listing a node group's instances after a failed deletion failed; keeping all its nodes", "nodeGroup", g.Id(), "err", lerr)
		return nil, err
	}
	state := func(ins []cloudprovider.Instance) map[string]*cloudprovider.InstanceStatus {
		m := make(map[string]*cloudprovider.InstanceStatus, len(ins))
		for _, in := range ins {
			m[in.Id] = in.Status
		}
		return m
	}
	was, now := state(before), state(after)
	deleted = map[string]bool{}
	for _, n := range nodes {
		id := n.Spec.ProviderID
		_, listedBefore := was[id]
		st, listed := now[id]
		if (listedBefore && !listed) || (listed && st != nil && st.State == cloudprovider.InstanceDeleting) {
			deleted[n.Name] = true
		}
	}
	return deleted, err
}

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

// evictByPriority evicts the node's pods group by group of
// --drain-priority-config, lowest priority first, each group with its own
// grace period and waited for before the next starts, as upstream; with
// the priority config the DaemonSet pods are among them, evicted and
// waited for as the others. Without it, one group: every pod at once,
// bounded by --max-graceful-termination-sec, DaemonSet pods best effort.
func (a *Actuator) evictByPriority(ctx context.Context, n *apiv1.Node, pods, ds []*apiv1.Pod) error {
	if len(a.opts.DrainPriorities) == 0 {
		return a.evictAll(ctx, n, pods, ds, int64(a.opts.MaxGracefulTerminationSec))
	}
	groups := a.opts.DrainPriorities
	byGroup := make([][]*apiv1.Pod, len(groups))
	for _, p := range append(slices.Clip(pods), ds...) {
		i := drainGroupOf(p, groups)
		byGroup[i] = append(byGroup[i], p)
	}
	for i, g := range groups {
		if len(byGroup[i]) == 0 {
			continue
		}
		klog.V(2).InfoS("Scale-down: evicting a priority group", "node", klog.KObj(n), "priority", g.Priority, "gracePeriodSeconds", g.GracePeriodSeconds, "pods", framework.PodNames(byGroup[i], 5))
		if err := a.evictAll(ctx, n, byGroup[i], nil, g.GracePeriodSeconds); err != nil {
			return fmt.Errorf("priority group %d: %w", g.Priority, err)
		}
	}
	return nil
}

// drainGroupOf is the group of a pod: the highest rule whose priority is
// at most the pod's; pods below the lowest rule go with it.
func drainGroupOf(p *apiv1.Pod, groups []config.DrainPriority) int {
	var prio int32
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	i := 0
	for j, g := range groups {
		if g.Priority <= prio {
			i = j
		}
	}
	return i
}

// evictAll evicts pods in parallel, each retried (PDB refusals come back as
// 429) until --max-pod-eviction-time, then waits for all of them to be gone
// for up to --max-graceful-termination-sec plus headroom. The bestEffort
// (DaemonSet) pods are evicted alongside: their failures are logged only,
// and their going is not waited for, as upstream does.
func (a *Actuator) evictAll(ctx context.Context, n *apiv1.Node, pods, bestEffort []*apiv1.Pod, maxGrace int64) error {
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func(i int, p *apiv1.Pod) {
			defer wg.Done()
			errs[i] = a.evict(ctx, p, deadline, maxGrace)
		}(i, p)
	}
	wg.Add(1)
	go func() { defer wg.Done(); a.evictBestEffort(ctx, n, bestEffort, maxGrace) }()
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s/%s: %v", pods[i].Namespace, pods[i].Name, err))
		}
	}
	a.deps.Outcomes.EvictionsEnded(scaledown.Evictions{Succeeded: len(pods) - len(failed), Failed: len(failed)})
	if len(failed) > 0 {
		return fmt.Errorf("evicting %d pod(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}

	waitUntil := a.clock.Now().Add(time.Duration(maxGrace)*time.Second + PodEvictionHeadroom)
	for {
		remaining := a.stillRunning(ctx, n, pods)
		if len(remaining) == 0 {
			return nil
		}
		if !a.clock.Now().Before(waitUntil) {
			return fmt.Errorf("%d evicted pod(s) still on the node after %ds: %s", len(remaining),
				maxGrace+int64(PodEvictionHeadroom/time.Second), framework.PodNames(remaining, 5))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.podGoneCheckInterval):
		}
	}
}

func (a *Actuator) evict(ctx context.Context, p *apiv1.Pod, deadline time.Time, maxGrace int64) error {
	grace := maxGrace
	switch {
	case p.Spec.TerminationGracePeriodSeconds != nil && (grace == 0 || *p.Spec.TerminationGracePeriodSeconds < grace):
		grace = *p.Spec.TerminationGracePeriodSeconds
	case grace == 0:
		// A group of --drain-priority-config with 0 seconds caps nothing
		// (upstream's reading): the pod's own, defaulted, period.
		grace = apiv1.DefaultTerminationGracePeriodSeconds
	}
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace},
	}
	attempts := 0
	for {
		attempts++
		err := a.deps.Kube.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			a.deps.Outcomes.PodEvicted(p)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		}
		if !a.clock.Now().Before(deadline) {
			return fmt.Errorf("still refused after %d attempt(s) over %s: %w", attempts, a.opts.MaxPodEvictionTime, err)
		}
		if apierrors.IsTooManyRequests(err) {
			klog.V(2).InfoS("Scale-down: eviction refused by a disruption budget; retrying", "pod", klog.KObj(p))
		} else {
			klog.InfoS("Scale-down: eviction failed; retrying", "pod", klog.KObj(p), "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.evictionRetryInterval):
		}
	}
}

// markNode taints the node ToBeDeletedByClusterAutoscaler and, with
// --cordon-node-before-terminating, cordons it in the same update.
func (a *Actuator) markNode(ctx context.Context, n *apiv1.Node) error {
	if _, err := MarkToBeDeleted(ctx, a.deps.Kube, n.Name, n, a.clock.Now(), a.opts.CordonNodeBeforeTerminate); err != nil {
		return err
	}
	a.deps.Outcomes.NodeTainted(n)
	return nil
}

// EnableDsEvictionKey on a DaemonSet pod says whether it is evicted before
// its node goes ("true" / "false"), whatever the flags say.
const EnableDsEvictionKey = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"

// daemonSetPodsToEvict picks the node's DaemonSet pods (mirror pods aside)
// that get an eviction: those annotated true, and unannotated ones when
// byDefault (--daemonset-eviction-for-occupied-nodes / -empty-nodes).
func daemonSetPodsToEvict(pods []*apiv1.Pod, byDefault bool) []*apiv1.Pod {
	var out []*apiv1.Pod
	for _, p := range pods {
		if !drain.IsDaemonSetPod(p) || drain.IsMirrorPod(p) || p.DeletionTimestamp != nil {
			continue
		}
		if v, ok := p.Annotations[EnableDsEvictionKey]; ok {
			if v == "true" {
				out = append(out, p)
			}
			continue
		}
		if byDefault {
			out = append(out, p)
		}
	}
	return out
}

// evictBestEffort evicts pods in parallel (retried until
// --max-pod-eviction-time) and waits for the calls, not for the pods: a
// failure is logged and does not stop the node's removal.
func (a *Actuator) evictBestEffort(ctx context.Context, n *apiv1.Node, pods []*apiv1.Pod, maxGrace int64) {
	if len(pods) == 0 {
		return
	}
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func(p *apiv1.Pod) {
			defer wg.Done()
			if err := a.evict(ctx, p, deadline, maxGrace); err != nil {
				klog.InfoS("Scale-down: DaemonSet pod not evicted (best effort; the node goes anyway)", "pod", klog.KObj(p), "node", klog.KObj(n), "err", err)
			}
		}(p)
	}
	wg.Wait()
}

// withoutExpendable drops the pods below --expendable-pods-priority-cutoff:
// the plan did not count them, and they go with the node.
func (a *Actuator) withoutExpendable(pods []*apiv1.Pod) []*apiv1.Pod {
	return drain.WithoutExpendable(pods, a.opts.ExpendablePodsPriorityCutoff)
}

// cachedPods returns, for each tainted node whose check after the delay
// after taint the informer cache can answer, the node's pods in the cache.
// The cache can answer once the node informer shows the node's
// ToBeDeleted taint: the autoscaler's own write came back through its
// watch, so its watches were delivering after the taint; a pod the
// scheduler bound before it saw the taint was bound before the delay
// began, and its watch event has had the whole delay to arrive. Upstream
// reads the informer cache for every node, without that condition; here
// a node whose taint the cache does not show yet (a lagging or broken
// watch) is missing from the map, and its pods are listed from the API
// server, one call for that node. The nodes of a batch cost one read of
// the cache in all, where one list a node through the client's QPS
// limiter held the next batch by seconds.
func (a *Actuator) cachedPods(nodes []*scaledown.UnneededNode) map[string][]*apiv1.Pod {
	if a.deps.Pods == nil || a.deps.Nodes == nil {
		return nil
	}
	out := make(map[string][]*apiv1.Pod, len(nodes))
	for _, u := range nodes {
		if n, err := a.deps.Nodes.Get(u.Node.Name); err == nil && clusterstate.HasToBeDeletedTaint(n) {
			out[u.Node.Name] = nil
		}
	}
	if len(out) == 0 {
		return nil
	}
	all, err := a.deps.Pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	for _, p := range all {
		if pods, ok := out[p.Spec.NodeName]; ok {
			out[p.Spec.NodeName] = append(pods, p)
		}
	}
	return out
}

// podsOnNode lists the pods bound to a node, from the API server.
func (a *Actuator) podsOnNode(ctx context.Context, name string) ([]*apiv1.Pod, error) {
	list, err := a.deps.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String(),
	})
	if err != nil {
		return nil, err
	}
	out := make([]*apiv1.Pod, 0, len(list.Items))
	for i := range list.Items {
		// Checked here too: not every client (fakes among them) applies
		// field selectors.
		if list.Items[i].Spec.NodeName == name {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// arrivedPods says which pods keep a node that was empty when planned.
func arrivedPods(toMove []*apiv1.Pod, blocking *drain.BlockingPod) string {
	if blocking != nil && blocking.Pod != nil {
		return fmt.Sprintf("pod %s/%s arrived", blocking.Pod.Namespace, blocking.Pod.Name)
	}
	return fmt.Sprintf("%d pod(s) arrived: %s", len(toMove), framework.PodNames(toMove, 5))
}

// stillRunning returns the evicted pods that still exist on the node (a pod recreated
// under the same name elsewhere, or finished, counts as gone).
func (a *Actuator) stillRunning(ctx context.Context, n *apiv1.Node, pods []*apiv1.Pod) []*apiv1.Pod {
	var out []*apiv1.Pod
	for _, p := range pods {
		cur, err := a.deps.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			out = append(out, p)
			continue
		}
		if cur.UID != p.UID || cur.Spec.NodeName != n.Name || cur.Status.Phase == apiv1.PodSucceeded || cur.Status.Phase == apiv1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out
}
