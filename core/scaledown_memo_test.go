package core

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// An idle cluster's loops reuse the previous loop's removal simulations
// while nothing they read changed (a node's status heartbeat included), and
// simulate again as soon as a pod changes: the unneeded nodes and their
// unneeded-since times are those a fresh simulation gives.
func TestScaleDownReusesUnchangedSimulations(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 10, nodes: 4, milliCPU: 2000, mem: 4 * test.GiB})
	var objs []runtime.Object
	for i, o := range nodes {
		n := o.(*apiv1.Node)
		objs = append(objs, test.BuildScheduledPod(fmt.Sprintf("small-%d", i), 100, 64*test.MiB, "rs-small", n.Name))
	}
	h := newHarness(t, testOptions(), p, join(nodes, objs)...)
	unneeded := func() map[string]time.Time {
		out := map[string]time.Time{}
		for _, u := range h.a.planner.Unneeded() {
			out[u.Node.Name] = u.Since
		}
		return out
	}
	// Loop 1 finds the unneeded nodes; loop 2 re-checks them as known ones.
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Second))
	want := unneeded()
	if len(want) == 0 {
		t.Fatal("no unneeded node")
	}
	simulated := h.a.planner.Simulated()

	h.runOnce(t0.Add(20 * time.Second))
	if got := h.a.planner.Simulated(); got != simulated {
		t.Fatalf("an unchanged cluster was simulated again (%d loops simulated, was %d)", got, simulated)
	}
	if got := unneeded(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reused loop: unneeded %v, want %v", got, want)
	}

	// A kubelet's heartbeat changes nothing the simulation reads.
	beat := h.node("g1-n2").DeepCopy()
	for i := range beat.Status.Conditions {
		beat.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(t0.Add(25 * time.Second))
	}
	updated, err := h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, beat, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The cache drops heartbeats (internal/informercache): the update shows as the
	// node's new resource version.
	h.waitCache("heartbeat", func() bool {
		n, err := h.a.cache.nodes.Get("g1-n2")
		return err == nil && n.ResourceVersion == updated.ResourceVersion
	})
	h.runOnce(t0.Add(30 * time.Second))
	if got := h.a.planner.Simulated(); got != simulated {
		t.Fatalf("a heartbeat made the loop simulate again")
	}

	// A new pod is a change: simulated again.
	h.createPod(test.BuildScheduledPod("another", 100, 64*test.MiB, "rs-other", "g1-n1"))
	h.runOnce(t0.Add(40 * time.Second))
	if got := h.a.planner.Simulated(); got != simulated+1 {
		t.Fatalf("a new pod: %d loops simulated, want %d", got, simulated+1)
	}
	if got := unneeded(); len(got) != len(want) {
		t.Fatalf("after a new small pod: unneeded %v, want %d nodes", got, len(want))
	}
}
