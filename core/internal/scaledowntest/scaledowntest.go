// Package scaledowntest builds the small clusters the scale-down packages
// are tested on, once for all of them: node groups of the test provider
// with their Nodes, the pods and PodDisruptionBudgets on them, the cluster
// state registry and the planner's input, and a fake clientset that serves
// them and records evictions. Core's harness, which runs the whole loop,
// serves its objects through the same clientset.
package scaledowntest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// T0 is after the test builders' creation timestamps: pods are old and
// nodes past their start-up time.
var T0 = time.Unix(1_700_000_000, 0).Add(2 * time.Hour)

// Options are config.Defaults with short eviction waits and no wait after
// tainting (tested on its own in actuation).
func Options() config.AutoscalingOptions {
	o := config.Defaults()
	o.MaxPodEvictionTime = 200 * time.Millisecond
	o.MaxGracefulTerminationSec = 1
	o.NodeDeleteDelayAfterTaint = 0
	return o
}

// Cluster is a test provider's node groups with their Nodes, and the pods
// and PodDisruptionBudgets of the cluster.
type Cluster struct {
	Provider *test.Provider
	Nodes    []*apiv1.Node
	Pods     []*apiv1.Pod
	PDBs     []*policyv1.PodDisruptionBudget
}

// NewCluster returns group id (min 0, max 20) of n ready nodes named
// "<id>-n<i>", each of 2 cpu and 4 GiB.
func NewCluster(id string, minSize, n int) *Cluster {
	c := &Cluster{Provider: test.NewProvider()}
	c.Provider.AddNodeGroup(id, minSize, 20, n, test.BuildTemplate(id, 2000, 4*test.GiB, nil))
	for i := range n {
		node := test.BuildNode(fmt.Sprintf("%s-n%d", id, i), 2000, 4*test.GiB)
		c.Provider.AddNode(id, node)
		c.Nodes = append(c.Nodes, node)
	}
	return c
}

// ThreeNodes returns group g1 of three nodes and the pod of n1: n0 is busy
// (1500m of 2 cpu), n1 lightly used (one 200m pod labelled app=light, which
// fits on n0), n2 empty. n1 and n2 are unneeded.
func ThreeNodes() (*Cluster, *apiv1.Pod) {
	c := NewCluster("g1", 0, 3)
	c.Pod("busy", 1500, "rs-busy", "g1-n0")
	light := c.Pod("light", 200, "rs-light", "g1-n1")
	light.Labels = map[string]string{"app": "light"}
	return c, light
}

// LightNodes returns group g1 of light+1 nodes: n0 half used (not a
// candidate) with room for the others' pods, then n1..n<light> each running
// one small pod. Every one of those can be drained.
func LightNodes(light int) *Cluster {
	c := NewCluster("g1", 0, light+1)
	c.Pod("fill", 1000, "fill-rs", "g1-n0")
	for i := 1; i <= light; i++ {
		c.Pod(fmt.Sprintf("light-%d", i), 100, "rs-light", fmt.Sprintf("g1-n%d", i))
	}
	return c
}

// Pod adds a pod of the ReplicaSet owner ("" for a bare pod) bound to node
// and returns it, for the test to change before use.
func (c *Cluster) Pod(name string, milliCPU int64, owner, node string) *apiv1.Pod {
	p := test.BuildScheduledPod(name, milliCPU, 64*test.MiB, owner, node)
	c.Pods = append(c.Pods, p)
	return p
}

// Node returns the named node.
func (c *Cluster) Node(name string) *apiv1.Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	panic("no node " + name)
}

// PDB adds a PodDisruptionBudget over the pods of namespace labelled
// app=<app> that allows allowed more disruptions.
func (c *Cluster) PDB(namespace, app string, allowed int32) {
	c.PDBs = append(c.PDBs, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

// replicaSetGone tells the ReplicaSets that do not exist: those named
// "gone-...".
func replicaSetGone(name string) bool { return strings.HasPrefix(name, "gone-") }

// DrainOptions are the drain rules of opts, where every ReplicaSet has 3
// replicas except those named "gone-...", which do not exist.
func DrainOptions(opts config.AutoscalingOptions) drain.Options {
	return drain.NewOptions(opts, func(_ string, ref metav1.OwnerReference) (int32, bool) {
		if ref.Kind == "ReplicaSet" && replicaSetGone(ref.Name) {
			return 0, false
		}
		return 3, true
	})
}

// Registry returns the cluster state registry updated with the cluster at now.
func (c *Cluster) Registry(t testing.TB, opts config.AutoscalingOptions, now time.Time) *clusterstate.Registry {
	t.Helper()
	r := clusterstate.NewRegistry(c.Provider, opts)
	if err := r.UpdateNodes(c.Nodes, now); err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	checkerOnce sync.Once
	checker     *simulator.PredicateChecker
	checkerErr  error
)

// Checker is the scheduler framework, built once per test binary: it keeps
// no state between calls.
func Checker(t testing.TB) *simulator.PredicateChecker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = simulator.NewPredicateChecker() })
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checker
}

// Input is the planner's view of the cluster at now, as core builds it:
// the snapshot of the nodes not being deleted with their pods except the
// expendable ones, and the cluster-wide limits of opts.
func (c *Cluster) Input(t testing.TB, opts config.AutoscalingOptions, now time.Time, beingDeleted map[string]bool) scaledown.PlannerInput {
	t.Helper()
	pods := drain.WithoutExpendable(c.Pods, opts.ExpendablePodsPriorityCutoff)
	byNode := map[string][]*apiv1.Pod{}
	for _, p := range pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	limits, err := resourcequotas.NewLimits(opts, c.Provider)
	if err != nil {
		t.Fatal(err)
	}
	snap := simulator.NewClusterSnapshot()
	if err := snap.SetClusterState(resourcequotas.LiveNodes(c.Nodes, beingDeleted), pods); err != nil {
		t.Fatal(err)
	}
	return scaledown.PlannerInput{
		Snapshot: func() (*simulator.ClusterSnapshot, error) { return snap, nil }, PodsByNode: byNode,
		Nodes: c.Nodes, PDBs: c.PDBs, BeingDeleted: beingDeleted,
		Quotas: resourcequotas.NewTracker(limits, c.Nodes, beingDeleted), Now: now,
	}
}

// Objects are the cluster's objects for a clientset, with the ReplicaSets
// the pods belong to (see WithReplicaSets).
func (c *Cluster) Objects() []runtime.Object {
	var out []runtime.Object
	for _, n := range c.Nodes {
		out = append(out, n)
	}
	for _, p := range c.Pods {
		out = append(out, p)
	}
	for _, p := range c.PDBs {
		out = append(out, p)
	}
	return WithReplicaSets(out)
}

// WithReplicaSets adds to objs the ReplicaSets their pods say they belong
// to (3 replicas each, none for names starting with "gone-"), so the drain
// rules find their controllers.
func WithReplicaSets(objs []runtime.Object) []runtime.Object {
	seen := map[string]bool{}
	out := append([]runtime.Object(nil), objs...)
	for _, o := range objs {
		p, ok := o.(*apiv1.Pod)
		if !ok {
			continue
		}
		for _, ref := range p.OwnerReferences {
			key := p.Namespace + "/" + ref.Name
			if ref.Kind != "ReplicaSet" || seen[key] || replicaSetGone(ref.Name) {
				continue
			}
			seen[key] = true
			replicas := int32(3)
			out = append(out, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: p.Namespace, UID: ref.UID},
				Spec:       appsv1.ReplicaSetSpec{Replicas: &replicas},
			})
		}
	}
	return out
}

// Kube is a fake clientset on which an eviction deletes its pod, unless
// Refuse says otherwise; every eviction asked for is recorded.
type Kube struct {
	*fake.Clientset

	mu        sync.Mutex
	evictions []string
	graces    map[string]int64
	refuse    func(ns, name string) error
}

// NewKube serves objs.
func NewKube(objs ...runtime.Object) *Kube {
	k := &Kube{Clientset: fake.NewClientset(objs...), graces: map[string]int64{}}
	k.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		key := ev.Namespace + "/" + ev.Name
		k.mu.Lock()
		k.evictions = append(k.evictions, key)
		if ev.DeleteOptions != nil && ev.DeleteOptions.GracePeriodSeconds != nil {
			k.graces[key] = *ev.DeleteOptions.GracePeriodSeconds
		}
		refuse := k.refuse
		k.mu.Unlock()
		if refuse != nil {
			if err := refuse(ev.Namespace, ev.Name); err != nil {
				return true, nil, err
			}
		}
		return true, nil, k.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ev.Namespace, ev.Name)
	})
	return k
}

// Refuse makes each eviction return f's error, if any, from now on (nil:
// evictions succeed again).
func (k *Kube) Refuse(f func(ns, name string) error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refuse = f
}

// Evictions are the pods ("namespace/name") evictions were asked for, in
// order, retries included.
func (k *Kube) Evictions() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.evictions...)
}

// Grace is the grace period the last eviction of pod ("namespace/name")
// asked for.
func (k *Kube) Grace(pod string) (int64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g, ok := k.graces[pod]
	return g, ok
}

// Events drains the events rec holds.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Deletions renders the provider's DeleteNodes calls as "group:n1,n2".
func Deletions(p *test.Provider) []string {
	var out []string
	for _, c := range p.CallsOf("DeleteNodes") {
		out = append(out, c.Group+":"+strings.Join(c.Nodes, ","))
	}
	return out
}

// Outcomes records what an actuator under test reports (scaledown.Outcomes);
// the events and metrics they become are core/report's, tested there.
type Outcomes struct {
	mu       sync.Mutex
	failures []scaledown.RemovalFailure
}

var _ scaledown.Outcomes = (*Outcomes)(nil)

func (o *Outcomes) RemovalsStarted(scaledown.RemovalStart) {}
func (o *Outcomes) NodeTainted(*apiv1.Node)                {}
func (o *Outcomes) PodEvicted(*apiv1.Pod)                  {}
func (o *Outcomes) EvictionsEnded(scaledown.Evictions)     {}

func (o *Outcomes) RemovalFailed(f scaledown.RemovalFailure) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures = append(o.failures, f)
}

func (o *Outcomes) NodeRemoved(*scaledown.UnneededNode) {}

// Failures returns the removal failures reported so far.
func (o *Outcomes) Failures() []scaledown.RemovalFailure {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.failures)
}
