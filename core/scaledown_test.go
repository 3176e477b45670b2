package core

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// Three 2-cpu nodes: n0 busy (1500m), n1 lightly used (one 200m pod that
// fits on n0), n2 empty. n1 and n2 are unneeded.
func scaleDownFixture(minSize int) (*test.Provider, []runtime.Object, *apiv1.Pod) {
	p, nodes := cluster(groupSpec{id: "g1", min: minSize, max: 10, nodes: 3, milliCPU: 2000, mem: 4 * test.GiB})
	light := test.BuildScheduledPod("light", 200, 256*test.MiB, "rs-light", "g1-n1")
	light.Labels = map[string]string{"app": "light"}
	busy := test.BuildScheduledPod("busy", 1500, test.GiB, "rs-busy", "g1-n0")
	return p, join(nodes, []runtime.Object{light, busy}), light
}

// protectFromScaleDown sets the scale-down-disabled annotation on the named
// node among objs, so that it is never a candidate.
func protectFromScaleDown(objs []runtime.Object, name string) {
	for _, o := range objs {
		if n, ok := o.(*apiv1.Node); ok && n.Name == name {
			n.Annotations = map[string]string{scaledown.ScaleDownDisabledAnnotation: "true"}
		}
	}
}

func TestScaleDownAfterUnneededTimeOnly(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(5 * time.Minute))
	h.runOnce(t0.Add(10*time.Minute - time.Second))
	if d := sdtest.Deletions(p); len(d) != 0 {
		t.Fatalf("deleted before the unneeded time: %v", d)
	}
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	d := sdtest.Deletions(p)
	sort.Strings(d)
	if !reflect.DeepEqual(d, []string{"g1:g1-n1", "g1:g1-n2"}) {
		t.Fatalf("DeleteNodes calls = %v, want n1 and n2", d)
	}
	if ev := h.evicts.Evictions(); !reflect.DeepEqual(ev, []string{"default/light"}) {
		t.Fatalf("evictions = %v", ev)
	}
	ev := h.events()
	if n := countEvents(ev, "ScaleDown node removed by cluster autoscaler"); n != 2 {
		t.Errorf("ScaleDown node events = %d: %v", n, ev)
	}
	if n := countEvents(ev, "ScaleDown deleting pod for node scale down"); n != 1 {
		t.Errorf("pod eviction events = %d: %v", n, ev)
	}
	if n := countEvents(ev, "ScaleDownEmpty Scale-down: removing empty node \"g1-n2\" involvedObject{kind=ConfigMap"); n != 1 {
		t.Errorf("ScaleDownEmpty events = %d: %v", n, ev)
	}
	// The drained node keeps its taint until the cloud removes it.
	if !hasTaint(h.node("g1-n1"), clusterstate.ToBeDeletedTaint) {
		t.Error("drained node lost its taint")
	}
	if h.podExists("default", "busy") == false || h.podExists("default", "light") {
		t.Error("wrong pods evicted")
	}
}

// A pod below --expendable-pods-priority-cutoff does not keep its node: the
// node counts as empty and goes, the pod with it.
func TestExpendablePodDoesNotKeepNode(t *testing.T) {
	cases := []struct {
		name     string
		priority int32
		want     []string
	}{
		{name: "below the cutoff", priority: -100, want: []string{"g1:g1-n1"}},
		{name: "at the default priority: a bare pod blocks", priority: 0, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
			batch := test.BuildScheduledPod("batch", 1500, test.GiB, "", "g1-n1")
			batch.Spec.Priority = ptr.To(tc.priority)
			h := newHarness(t, testOptions(), p, join(nodes, fill(nodes[:1], 1500), []runtime.Object{batch})...)
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := sdtest.Deletions(p); !reflect.DeepEqual(d, tc.want) {
				t.Fatalf("DeleteNodes calls = %v, want %v", d, tc.want)
			}
		})
	}
}

func TestScaleDownCooldownAfterScaleUp(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	// A pod that fits no node of g1 (3 cpu) triggers a scale-up in "big".
	p.AddNodeGroup("big", 0, 3, 0, test.BuildTemplate("big", 4000, 8*test.GiB, nil))
	objs = append(objs, test.BuildPendingPod("huge", 3000, test.GiB, ""))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"big+1"}) {
		t.Fatalf("scale-up = %v", got)
	}
	h.runOnce(t0.Add(time.Minute))
	h.runOnce(t0.Add(9 * time.Minute))
	if d := sdtest.Deletions(p); len(d) != 0 {
		t.Fatalf("scale-down within --scale-down-delay-after-add: %v", d)
	}
	h.runOnce(t0.Add(11 * time.Minute))
	if d := sdtest.Deletions(p); len(d) != 2 {
		t.Fatalf("scale-down after the delay: %v", d)
	}
}

// --scale-down-enabled=false: the loop skips scale-down altogether.
func TestScaleDownDisabled(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	o := testOptions()
	o.ScaleDownEnabled = false
	h := newHarness(t, o, p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if d := sdtest.Deletions(p); len(d) != 0 {
		t.Fatalf("DeleteNodes calls = %v, want none", d)
	}
	if un := h.a.planner.Unneeded(); len(un) != 0 {
		t.Fatalf("unneeded = %d nodes, want none planned", len(un))
	}
}

func TestStaleTaintsRemovedAtStart(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
	stale := nodes[0].(*apiv1.Node)
	stale.Spec.Taints = []apiv1.Taint{
		{Key: clusterstate.ToBeDeletedTaint, Value: "1700000000", Effect: apiv1.TaintEffectNoSchedule},
		{Key: clusterstate.DeletionCandidateTaint, Value: "1700000000", Effect: apiv1.TaintEffectPreferNoSchedule},
		{Key: "dedicated", Value: "x", Effect: apiv1.TaintEffectNoSchedule},
	}
	kube := fake.NewClientset(sdtest.WithReplicaSets(join(nodes, fill(nodes, 1800)))...)
	o := testOptions()
	o.ScanInterval = time.Hour
	a, err := newAutoscaler(o, kube, p, nil, nil, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _ := kube.CoreV1().Nodes().Get(ctx, stale.Name, metav1.GetOptions{})
		if len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == "dedicated" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale taints not removed: %+v", n.Spec.Taints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Run wrote the status and ran an iteration; ExitCleanUp removes it.
	for time.Now().Before(deadline) && len(p.CallsOf("Refresh")) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "cluster-autoscaler-status", metav1.GetOptions{}); err != nil {
		t.Fatalf("status ConfigMap not written: %v", err)
	}
	a.ExitCleanUp()
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "cluster-autoscaler-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("status ConfigMap left after ExitCleanUp: %v", err)
	}
	if len(p.CallsOf("Cleanup")) != 1 {
		t.Fatal("provider Cleanup not called")
	}
}

// Drains run in the background; meanwhile the node counts as being
// deleted: not a candidate again, not capacity for pending pods, counted
// against the group's min size, and in pending_node_deletions.
func TestBackgroundDrainTracksNode(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	o := testOptions()
	o.MaxPodEvictionTime = time.Minute
	h := newAsyncHarness(t, o, p, objs...)
	read := scrape(t)
	release := h.refuseEvictions()
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute)) // n2 (empty) and n1 (drain) start
	deadline := time.Now().Add(5 * time.Second)
	for _, drains := h.a.removals.InFlight(); drains == 0 || len(sdtest.Deletions(p)) == 0; _, drains = h.a.removals.InFlight() {
		if time.Now().After(deadline) {
			t.Fatalf("drain not started: %v", sdtest.Deletions(p))
		}
		time.Sleep(time.Millisecond)
	}
	if !h.a.removals.BeingDeleted()["g1-n1"] {
		t.Fatal("draining node not tracked")
	}
	h.waitCache("taint on n1", func() bool { n, _ := h.a.cache.nodes.Get("g1-n1"); return hasTaint(n, clusterstate.ToBeDeletedTaint) })
	// Another loop while the drain runs: n1 is neither re-planned nor
	// counted for scale-up; with n2 gone and n1 leaving, g1 is at its min.
	h.runOnce(t0.Add(12 * time.Minute))
	if un := h.a.planner.Unneeded(); len(un) != 0 {
		t.Fatalf("unneeded while draining: %d", len(un))
	}
	if v := read("pending_node_deletions", nil); v != 1 {
		t.Errorf("pending_node_deletions = %v after a loop with the drain in flight, want 1", v)
	}
	release()
	h.a.actuator.Wait()
	d := sdtest.Deletions(p)
	sort.Strings(d)
	if !reflect.DeepEqual(d, []string{"g1:g1-n1", "g1:g1-n2"}) {
		t.Fatalf("DeleteNodes calls = %v", d)
	}
}

// When a removal ends, the loop is woken at once: more unneeded nodes may be
// waiting for the --max-scale-down-parallelism budget it held.
func TestEndedRemovalWakesTheLoop(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if len(sdtest.Deletions(p)) == 0 {
		t.Fatal("no removal in the second loop")
	}
	woke := make(chan string, 1)
	go func() { woke <- h.a.trigger.Wait(h.ctx, time.Hour, false) }()
	select {
	case got := <-woke:
		if got != WakeRemoval {
			t.Fatalf("loop woke for %q, want %q", got, WakeRemoval)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop was not woken after the removal ended")
	}
}

// After a loop that finds nodes unneeded, the loop knows when the first of
// them reaches --scale-down-unneeded-time, to wake then.
func TestNextScaleDownAtIsWhenTheFirstNodeComesOfAge(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if want := t0.Add(testOptions().NodeGroupDefaults.ScaleDownUnneededTime); !h.a.nextScaleDownAt.Equal(want) {
		t.Fatalf("next scale-down at %v, want %v (first unneeded at t0 + --scale-down-unneeded-time)", h.a.nextScaleDownAt, want)
	}
}
