package core

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/actuation"
)

// t0 is after the test builders' creation timestamps, so pods are old
// enough to scale up for and nodes are past their start-up time.
var t0 = time.Unix(1_700_000_000, 0).Add(2 * time.Hour)

type harness struct {
	t        testing.TB
	kube     *fake.Clientset
	provider *test.Provider
	a        *Autoscaler
	recorder *record.FakeRecorder
	ctx      context.Context
	// evicts records the evictions asked of kube, which delete their pod.
	evicts *sdtest.Kube
}

// newHarness builds an autoscaler on a fake clientset holding objs and the
// given provider. Informers are started and synced; RunOnce is called by the
// test. Node removals run synchronously, so their outcome is known when
// RunOnce returns.
func newHarness(t testing.TB, opts config.AutoscalingOptions, provider *test.Provider, objs ...runtime.Object) *harness {
	t.Helper()
	return buildHarness(t, opts, provider, false, nil, objs...)
}

// newHarnessWith is newHarness with more actuator options.
func newHarnessWith(t testing.TB, opts config.AutoscalingOptions, provider *test.Provider, actuatorOptions []actuation.Option, objs ...runtime.Object) *harness {
	t.Helper()
	return buildHarness(t, opts, provider, false, actuatorOptions, objs...)
}

// newAsyncHarness is newHarness with node removals in their own goroutines,
// as in production: for tests of what happens while a drain runs.
func newAsyncHarness(t testing.TB, opts config.AutoscalingOptions, provider *test.Provider, objs ...runtime.Object) *harness {
	t.Helper()
	return buildHarness(t, opts, provider, true, nil, objs...)
}

func buildHarness(t testing.TB, opts config.AutoscalingOptions, provider *test.Provider, async bool, extra []actuation.Option, objs ...runtime.Object) *harness {
	t.Helper()
	evicts := sdtest.NewKube(sdtest.WithReplicaSets(objs)...)
	kube := evicts.Clientset
	rec := record.NewFakeRecorder(100000)
	rec.IncludeObject = true
	h := &harness{t: t, kube: kube, provider: provider, recorder: rec, evicts: evicts}
	actuatorOptions := []actuation.Option{actuation.WithPacing(5*time.Millisecond, 5*time.Millisecond)}
	if !async {
		actuatorOptions = append(actuatorOptions, actuation.Synchronous())
	}
	actuatorOptions = append(actuatorOptions, extra...)
	a, err := newAutoscaler(opts, kube, provider, rec, nil, clock.RealClock{}, actuatorOptions...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.ctx = ctx
	if !a.startInformers(ctx) {
		t.Fatal("caches did not sync")
	}
	h.a = a
	return h
}

// testOptions returns the defaults with a fixed expander and no API writes that tests
// do not look at.
func testOptions() config.AutoscalingOptions {
	o := config.Defaults()
	o.ExpanderNames = []string{"least-waste"}
	o.MaxPodEvictionTime = 200 * time.Millisecond
	o.MaxGracefulTerminationSec = 1
	// Upstream's 5 s wait after tainting is tested on its own
	// (TestDelayAfterTaint...); elsewhere it would only slow tests down.
	o.NodeDeleteDelayAfterTaint = 0
	return o
}

// refuseEvictions makes every eviction fail as a PodDisruptionBudget with no
// disruption left would, until the returned release is called; from then
// on evictions succeed. (Refused rather than blocked: the fake clientset
// holds its lock while a reactor runs.)
func (h *harness) refuseEvictions() (release func()) {
	h.evicts.Refuse(func(string, string) error { return apierrors.NewTooManyRequests("disruption budget", 1) })
	return func() { h.evicts.Refuse(nil) }
}

func (h *harness) runOnce(now time.Time) {
	h.t.Helper()
	if err := h.a.RunOnce(h.ctx, now); err != nil {
		h.t.Fatalf("RunOnce: %v", err)
	}
}

// events drains the recorder.
func (h *harness) events() []string { return sdtest.Events(h.recorder) }

func countEvents(events []string, substr string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, substr) {
			n++
		}
	}
	return n
}

// waitCache polls until cond holds on the informer caches.
func (h *harness) waitCache(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("informer cache never showed %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) createNode(n *apiv1.Node) {
	h.t.Helper()
	if _, err := h.kube.CoreV1().Nodes().Create(h.ctx, n, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.waitCache("node "+n.Name, func() bool { _, err := h.a.cache.nodes.Get(n.Name); return err == nil })
}

func (h *harness) createPod(p *apiv1.Pod) {
	h.t.Helper()
	if _, err := h.kube.CoreV1().Pods(p.Namespace).Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.waitCache("pod "+p.Name, func() bool { _, err := h.a.cache.pods.Pods(p.Namespace).Get(p.Name); return err == nil })
}

func (h *harness) updateNode(n *apiv1.Node) {
	h.t.Helper()
	if _, err := h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.waitCache("node update "+n.Name, func() bool {
		got, err := h.a.cache.nodes.Get(n.Name)
		return err == nil && len(got.Spec.Taints) == len(n.Spec.Taints) && len(got.Annotations) == len(n.Annotations) && maps.Equal(got.Labels, n.Labels)
	})
}

func (h *harness) node(name string) *apiv1.Node {
	h.t.Helper()
	n, err := h.kube.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) podExists(ns, name string) bool {
	_, err := h.kube.CoreV1().Pods(ns).Get(h.ctx, name, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

func hasTaint(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// increases renders IncreaseSize calls as "group+delta" for assertions.
func increases(p *test.Provider) []string {
	var out []string
	for _, c := range p.CallsOf("IncreaseSize") {
		out = append(out, fmt.Sprintf("%s+%d", c.Group, c.Delta))
	}
	return out
}

// cluster builds a provider with groups and their ready nodes, and the
// matching Node objects. Each group spec: id, min, max, nodes, cpu, mem.
type groupSpec struct {
	id            string
	min, max      int
	nodes         int
	milliCPU, mem int64
	labels        map[string]string
	taints        []apiv1.Taint
}

func cluster(specs ...groupSpec) (*test.Provider, []runtime.Object) {
	p := test.NewProvider()
	var objs []runtime.Object
	for _, s := range specs {
		tmpl := test.BuildTemplate(s.id, s.milliCPU, s.mem, s.labels, s.taints...)
		p.AddNodeGroup(s.id, s.min, s.max, s.nodes, tmpl)
		for i := 0; i < s.nodes; i++ {
			n := test.BuildNode(fmt.Sprintf("%s-n%d", s.id, i), s.milliCPU, s.mem)
			maps.Copy(n.Labels, s.labels)
			n.Spec.Taints = append(n.Spec.Taints, s.taints...)
			p.AddNode(s.id, n)
			objs = append(objs, n)
		}
	}
	return p, objs
}

// fill returns pods (one per node) using most of each node's cpu.
func fill(nodes []runtime.Object, milliCPU int64) []runtime.Object {
	var out []runtime.Object
	for _, o := range nodes {
		n := o.(*apiv1.Node)
		out = append(out, test.BuildScheduledPod("fill-"+n.Name, milliCPU, test.GiB, "fill-rs", n.Name))
	}
	return out
}

// pendingPods are count pods of the owner prefix, unschedulable.
func pendingPods(prefix string, count int, milliCPU, mem int64) []runtime.Object {
	var out []runtime.Object
	for i := 0; i < count; i++ {
		out = append(out, test.BuildPendingPod(fmt.Sprintf("%s-%d", prefix, i), milliCPU, mem, prefix))
	}
	return out
}

func join(groups ...[]runtime.Object) []runtime.Object { return slices.Concat(groups...) }

// TestMain registers klog's flags so `go test ./core -args -v=4` shows the
// decision logs.
func TestMain(m *testing.M) {
	klog.InitFlags(nil)
	flag.Parse()
	os.Exit(m.Run())
}
