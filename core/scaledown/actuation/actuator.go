// Package actuation removes the nodes scale-down chose: it taints them
// ToBeDeletedByClusterAutoscaler, evicts their pods (drain) or checks they
// are still empty, asks the provider to delete them, and gives a node back
// (taint removed) when its removal fails. Every removal is reported to the
// deletion tracker when it starts and when it ends, and each of its steps
// to Outcomes (the reporter), which records it: the actuator itself
// records no event or metric.
//
// By role, as upstream splits its actuator: actuator.go holds the Actuator
// and what removals share; delete.go deletes empty nodes, in one call per
// node group; drain.go drains a node and deletes it; evict.go evicts pods
// through the Eviction API; taints.go and softtaint.go write the taints;
// delay.go waits for the delay-deletion annotations.
package actuation

import (
	"context"
	"fmt"
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
