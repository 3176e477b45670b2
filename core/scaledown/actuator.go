package scaledown

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
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
	deps ActuatorDeps

	clock                 clock.PassiveClock
	evictionRetryInterval time.Duration
	podGoneCheckInterval  time.Duration
	async                 bool

	mu       sync.Mutex
	deleting map[string]string // node → group id
	draining map[string]bool   // the nodes of deleting that are drained
	// Completed deletions and failures so far; the caller turns changes into
	// cooldowns on its own clock.
	deletions int
	failures  int
	wg        sync.WaitGroup
}

// ActuatorDeps is what the actuator needs from the rest of the autoscaler.
type ActuatorDeps struct {
	Kube     kubernetes.Interface
	Provider cloudprovider.CloudProvider
	Recorder record.EventRecorder
	// StatusRef is the object of the ScaleDownEmpty events.
	StatusRef *apiv1.ObjectReference
	// ControllerReplicas: as the planner's, for the final check of a node's
	// pods before it is drained; nil skips the controller checks.
	ControllerReplicas func(namespace string, ref metav1.OwnerReference) (int32, bool)
	// PDBs lists the cluster's PodDisruptionBudgets, for the final check:
	// a kube-system pod covered by one may be evicted.
	PDBs func() ([]*policyv1.PodDisruptionBudget, error)
	// RemovalDone, when set, is called each time a removal ends (done,
	// failed or given up): its budget is free again, so the loop may start
	// the next one without waiting for the scan interval.
	RemovalDone func()
}

// ActuatorOption changes how an actuator paces its work.
type ActuatorOption func(*Actuator)

// WithPacing sets how often a refused eviction is retried and how often an
// evicted pod is checked for being gone (5s each by default).
func WithPacing(evictionRetry, podGoneCheck time.Duration) ActuatorOption {
	return func(a *Actuator) { a.evictionRetryInterval, a.podGoneCheckInterval = evictionRetry, podGoneCheck }
}

// Synchronous runs each removal in the caller's goroutine instead of its
// own, so that its outcome is known when DeleteEmpty or Drain returns.
func Synchronous() ActuatorOption { return func(a *Actuator) { a.async = false } }

// NewActuator returns an actuator.
func NewActuator(opts config.AutoscalingOptions, deps ActuatorDeps, options ...ActuatorOption) *Actuator {
	a := &Actuator{
		opts: opts, deps: deps,
		clock: clock.RealClock{}, evictionRetryInterval: 5 * time.Second, podGoneCheckInterval: 5 * time.Second, async: true,
		deleting: map[string]string{}, draining: map[string]bool{},
	}
	for _, o := range options {
		o(a)
	}
	return a
}

// BeingDeleted returns the nodes being removed.
func (a *Actuator) BeingDeleted() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]bool, len(a.deleting))
	for n := range a.deleting {
		out[n] = true
	}
	return out
}

// DeletingInGroup counts the group's nodes being removed.
func (a *Actuator) DeletingInGroup(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, g := range a.deleting {
		if g == id {
			n++
		}
	}
	return n
}

// DrainInProgress reports whether a non-empty node is being drained.
func (a *Actuator) DrainInProgress() bool {
	_, draining := a.InFlight()
	return draining > 0
}

// InFlight counts the removals started and not yet finished or given up, and
// how many of them drain their node.
func (a *Actuator) InFlight() (removals, drains int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.deleting), len(a.draining)
}

// Draining returns the nodes being drained: their pods are being evicted
// and will need room elsewhere.
func (a *Actuator) Draining() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.draining)
}

// Counts returns how many node removals completed and failed so far.
func (a *Actuator) Counts() (deletions, failures int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deletions, a.failures
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

func (a *Actuator) track(cands []*Candidate, drain bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range cands {
		a.deleting[c.Node.Name] = c.GroupID
		if drain {
			a.draining[c.Node.Name] = true
		}
	}
}

func (a *Actuator) finish(names []string, deleted int, failed bool) {
	a.mu.Lock()
	for _, n := range names {
		delete(a.deleting, n)
		delete(a.draining, n)
	}
	a.deletions += deleted
	if failed {
		a.failures++
	}
	a.mu.Unlock()
	if a.deps.RemovalDone != nil {
		a.deps.RemovalDone()
	}
}

func scaleDownReason(c *Candidate) string {
	switch {
	case c.Unready:
		return metrics.ScaleDownUnready
	case c.Empty:
		return metrics.ScaleDownEmpty
	}
	return metrics.ScaleDownUnderutilized
}

// fail undoes a removal: the taint goes, the node stays, and the failure
// starts --scale-down-delay-after-failure.
func (a *Actuator) fail(ctx context.Context, n *apiv1.Node, errType string, err error) {
	klog.Errorf("Scale-down: removing node %s failed: %v; keeping it", n.Name, err)
	metrics.RegisterError(errType)
	// Not cancelled with ctx: a removal cut short by shutdown still gives
	// its node back.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, uerr := UnmarkToBeDeleted(uctx, a.deps.Kube, n.Name, a.opts.CordonNodeBeforeTerminate); uerr != nil {
		klog.Errorf("Scale-down: %v", uerr)
	}
	a.deps.Recorder.Eventf(n, apiv1.EventTypeWarning, "ScaleDownFailed", "failed to remove node: %v", err)
}

// DeleteEmpty removes nodes running only DaemonSet and mirror pods, in bulk:
// taint them all, check they are still empty, then one DeleteNodes call per
// group.
func (a *Actuator) DeleteEmpty(ctx context.Context, cands []*Candidate) {
	if len(cands) == 0 {
		return
	}
	a.track(cands, false)
	for _, c := range cands {
		a.deps.Recorder.Eventf(a.deps.StatusRef, apiv1.EventTypeNormal, "ScaleDownEmpty", "Scale-down: removing empty node %q", c.Node.Name)
	}
	a.run(func() { a.deleteEmpty(ctx, cands) })
}

func (a *Actuator) deleteEmpty(ctx context.Context, cands []*Candidate) {
	names := make([]string, 0, len(cands))
	for _, c := range cands {
		names = append(names, c.Node.Name)
	}
	deleted, failed := 0, false
	defer func() { a.finish(names, deleted, failed) }()

	byGroup := map[string][]*Candidate{}
	var order []string
	for _, c := range cands {
		if err := a.markNode(ctx, c.Node); err != nil {
			a.fail(ctx, c.Node, metrics.APICallError, err)
			failed = true
			continue
		}
		// A pod may have been bound since the simulation. The check reads the
		// API server, not the informer cache, which may lag the binding; with
		// the taint on, nothing new can arrive, so its answer is final. No
		// drain rules apply: any pod to move or blocking one means a pod
		// arrived, so the node is not empty either way.
		pods, err := a.podsOnNode(ctx, c.Node.Name)
		if err != nil {
			a.fail(ctx, c.Node, metrics.APICallError, fmt.Errorf("checking the node is still empty: %w", err))
			failed = true
			continue
		}
		if toMove, blocking := drain.PodsToMove(a.withoutExpendable(pods), nil, drain.Options{}, a.clock.Now()); len(toMove) > 0 || blocking != nil {
			klog.Infof("Scale-down: node %s is no longer empty (%s); not removing it", c.Node.Name, arrivedPods(toMove, blocking))
			if _, err := UnmarkToBeDeleted(ctx, a.deps.Kube, c.Node.Name, a.opts.CordonNodeBeforeTerminate); err != nil {
				klog.Errorf("Scale-down: %v", err)
			}
			continue
		}
		// Best effort, as upstream: the node goes whatever the answers.
		a.evictBestEffort(ctx, c.Node, daemonSetPodsToEvict(pods, a.opts.DaemonSetEvictionForEmptyNodes))
		if _, ok := byGroup[c.GroupID]; !ok {
			order = append(order, c.GroupID)
		}
		byGroup[c.GroupID] = append(byGroup[c.GroupID], c)
	}
	for _, id := range order {
		group := byGroup[id]
		nodes := make([]*apiv1.Node, len(group))
		gnames := make([]string, len(group))
		for i, c := range group {
			nodes[i], gnames[i] = c.Node, c.Node.Name
		}
		if started, err := a.deleteNodes(nodes); err != nil {
			// The group may have deleted some before failing: those keep
			// their taint, or pods would be scheduled onto a node going away.
			failed = true
			var gone []*Candidate
			gnames = gnames[:0]
			for _, c := range group {
				if started[c.Node.Name] {
					gone = append(gone, c)
					gnames = append(gnames, c.Node.Name)
				} else {
					a.fail(ctx, c.Node, metrics.CloudProviderError, err)
				}
			}
			if group = gone; len(group) == 0 {
				continue
			}
		}
		deleted += len(group)
		for _, c := range group {
			gpuName, gpuType := cloudprovider.GPULabels(a.deps.Provider, c.Node)
			metrics.RegisterScaleDown(1, scaleDownReason(c), gpuName, gpuType)
			a.deps.Recorder.Event(c.Node, apiv1.EventTypeNormal, "ScaleDown", "node removed by cluster autoscaler")
		}
		klog.Infof("Scale-down: removed empty node(s) %s from node group %s", strings.Join(gnames, ", "), id)
	}
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
		return nil, nil
	}
	after, lerr := g.Nodes()
	if lerr != nil {
		klog.Warningf("Scale-down: listing the instances of node group %s after a failed deletion: %v; keeping all its nodes", g.Id(), lerr)
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
func (a *Actuator) Drain(ctx context.Context, cands []*Candidate) {
	a.track(cands, true)
	var tainted []*Candidate
	for _, c := range cands {
		if err := a.markNode(ctx, c.Node); err != nil {
			a.fail(ctx, c.Node, metrics.APICallError, err)
			a.finish([]string{c.Node.Name}, 0, true)
			continue
		}
		a.deps.Recorder.Eventf(a.deps.StatusRef, apiv1.EventTypeNormal, "ScaleDown", "Scale-down: removing node %s, utilization: %s, pods to reschedule: %s",
			c.Node.Name, describeUtilization(c.Utilization), framework.PodNames(c.PodsToEvict, 0))
		tainted = append(tainted, c)
	}
	for _, c := range tainted {
		a.run(func() { a.drain(ctx, c) })
	}
}

func (a *Actuator) drain(ctx context.Context, c *Candidate) {
	n := c.Node
	deleted, failed := 0, false
	defer func() { a.finish([]string{n.Name}, deleted, failed) }()

	start := a.clock.Now()
	// Re-read the node's pods from the API server now that it is tainted:
	// the set is final, and nothing bound since the plan is left behind.
	current, err := a.podsOnNode(ctx, n.Name)
	if err != nil {
		a.fail(ctx, n, metrics.APICallError, fmt.Errorf("listing the node's pods: %w", err))
		failed = true
		return
	}
	// PDBs only say which pods they cover; their budgets are left to the
	// Eviction API, whose refusals are retried.
	var pdbs []*policyv1.PodDisruptionBudget
	if a.deps.PDBs != nil {
		if pdbs, err = a.deps.PDBs(); err != nil {
			a.fail(ctx, n, metrics.InternalError, fmt.Errorf("listing PodDisruptionBudgets: %w", err))
			failed = true
			return
		}
	}
	opts := a.drainOptions()
	opts.BudgetsLeftToEviction = true
	pods, blocking := drain.PodsToMove(a.withoutExpendable(current), pdbs, opts, start)
	if blocking != nil && blocking.Pod != nil {
		a.fail(ctx, n, metrics.TransientError, fmt.Errorf("drain blocked: %s", describeBlocking(blocking)))
		failed = true
		return
	}
	ds := daemonSetPodsToEvict(current, a.opts.DaemonSetEvictionForOccupiedNodes)
	klog.Infof("Scale-down: draining node %s (node group %s, unneeded since %s): evicting %d pod(s): %s; %d DaemonSet pod(s), best effort",
		n.Name, c.GroupID, c.Since.Format(time.RFC3339), len(pods), framework.PodNames(pods, 5), len(ds))

	if err := a.evictAll(ctx, n, pods, ds); err != nil {
		a.fail(ctx, n, metrics.APICallError, err)
		failed = true
		return
	}
	if started, err := a.deleteNodes([]*apiv1.Node{n}); err != nil && !started[n.Name] {
		a.fail(ctx, n, metrics.CloudProviderError, fmt.Errorf("deleting node: %w", err))
		failed = true
		return
	}
	deleted = 1
	gpuName, gpuType := cloudprovider.GPULabels(a.deps.Provider, n)
	metrics.RegisterScaleDown(1, scaleDownReason(c), gpuName, gpuType)
	a.deps.Recorder.Event(n, apiv1.EventTypeNormal, "ScaleDown", "node removed by cluster autoscaler")
	klog.Infof("Scale-down: removed node %s from node group %s after evicting %d pod(s) in %s",
		n.Name, c.GroupID, len(pods), a.clock.Now().Sub(start).Round(time.Second))
}

func (a *Actuator) drainOptions() drain.Options {
	return drain.NewOptions(a.opts, a.deps.ControllerReplicas)
}

// evictAll evicts pods in parallel, each retried (PDB refusals come back as
// 429) until --max-pod-eviction-time, then waits for all of them to be gone
// for up to --max-graceful-termination-sec plus headroom. The bestEffort
// (DaemonSet) pods are evicted alongside: their failures are logged only,
// and their going is not waited for, as upstream does.
func (a *Actuator) evictAll(ctx context.Context, n *apiv1.Node, pods, bestEffort []*apiv1.Pod) error {
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func(i int, p *apiv1.Pod) {
			defer wg.Done()
			errs[i] = a.evict(ctx, p, deadline)
		}(i, p)
	}
	wg.Add(1)
	go func() { defer wg.Done(); a.evictBestEffort(ctx, n, bestEffort) }()
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s/%s: %v", pods[i].Namespace, pods[i].Name, err))
		}
	}
	metrics.RegisterEvictions(len(pods)-len(failed), true)
	if len(failed) > 0 {
		metrics.RegisterEvictions(len(failed), false)
		return fmt.Errorf("evicting %d pod(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}

	waitUntil := a.clock.Now().Add(time.Duration(a.opts.MaxGracefulTerminationSec)*time.Second + PodEvictionHeadroom)
	for {
		remaining := a.stillRunning(ctx, n, pods)
		if len(remaining) == 0 {
			return nil
		}
		if !a.clock.Now().Before(waitUntil) {
			return fmt.Errorf("%d evicted pod(s) still on the node after %ds: %s", len(remaining),
				a.opts.MaxGracefulTerminationSec+int(PodEvictionHeadroom/time.Second), framework.PodNames(remaining, 5))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.podGoneCheckInterval):
		}
	}
}

func (a *Actuator) evict(ctx context.Context, p *apiv1.Pod, deadline time.Time) error {
	grace := int64(a.opts.MaxGracefulTerminationSec)
	if p.Spec.TerminationGracePeriodSeconds != nil && *p.Spec.TerminationGracePeriodSeconds < grace {
		grace = *p.Spec.TerminationGracePeriodSeconds
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
			a.deps.Recorder.Event(p, apiv1.EventTypeNormal, "ScaleDown", "deleting pod for node scale down")
			return nil
		case apierrors.IsNotFound(err):
			return nil
		}
		if !a.clock.Now().Before(deadline) {
			return fmt.Errorf("still refused after %d attempt(s) over %s: %w", attempts, a.opts.MaxPodEvictionTime, err)
		}
		if apierrors.IsTooManyRequests(err) {
			klog.V(2).Infof("Scale-down: eviction of pod %s/%s refused (disruption budget); retrying", p.Namespace, p.Name)
		} else {
			klog.Warningf("Scale-down: eviction of pod %s/%s failed: %v; retrying", p.Namespace, p.Name, err)
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
	a.deps.Recorder.Event(n, apiv1.EventTypeNormal, "ScaleDown", "marked the node as toBeDeleted/unschedulable")
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
func (a *Actuator) evictBestEffort(ctx context.Context, n *apiv1.Node, pods []*apiv1.Pod) {
	if len(pods) == 0 {
		return
	}
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func(p *apiv1.Pod) {
			defer wg.Done()
			if err := a.evict(ctx, p, deadline); err != nil {
				klog.Warningf("Scale-down: DaemonSet pod %s/%s on node %s not evicted (best effort; the node goes anyway): %v", p.Namespace, p.Name, n.Name, err)
			}
		}(p)
	}
	wg.Wait()
}

// describeUtilization renders a node's utilization for the ScaleDown event.
func describeUtilization(u utilization.Info) string {
	return fmt.Sprintf("{cpu: %.2f, memory: %.2f, gpu: %.2f, utilization: %.2f (%s)}", u.CpuUtil, u.MemUtil, u.GpuUtil, u.Utilization, resourceLabel(u))
}

// withoutExpendable drops the pods below --expendable-pods-priority-cutoff:
// the plan did not count them, and they go with the node.
func (a *Actuator) withoutExpendable(pods []*apiv1.Pod) []*apiv1.Pod {
	return drain.WithoutExpendable(pods, a.opts.ExpendablePodsPriorityCutoff)
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

// stillRunning: evicted pods that still exist on the node (a pod recreated
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
