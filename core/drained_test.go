package core

import (
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
)

// Pods still being evicted from a node under drain are pending pods in the
// simulation, as upstream's currently-drained-nodes processor makes them:
// the only node they fit on is not removed while they move, so no pod is
// left without room and no scale-up follows.
func TestPodsOfDrainedNodeKeepTheirDestination(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 3, milliCPU: 2000, mem: 4 * test.GiB})
	// n0 is full; n1's pod fits only on n2, which is kept out of scale-down
	// until n1's drain has started.
	objs := join(nodes, []runtime.Object{
		test.BuildScheduledPod("busy", 1900, test.GiB, "rs-busy", "g1-n0"),
		test.BuildScheduledPod("moving", 900, test.GiB, "rs-moving", "g1-n1"),
	})
	nodes[2].(*apiv1.Node).Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
	o := testOptions()
	o.MaxPodEvictionTime = time.Minute
	h := newAsyncHarness(t, o, p, objs...)
	release := h.refuseEvictions()
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute)) // n1's drain starts, its pod stays
	deadline := time.Now().Add(5 * time.Second)
	for !h.a.removals.Draining()["g1-n1"] {
		if time.Now().After(deadline) {
			t.Fatal("n1's drain did not start")
		}
		time.Sleep(time.Millisecond)
	}
	n2 := h.node("g1-n2")
	n2.Annotations = nil
	h.updateNode(n2)

	h.runOnce(t0.Add(12 * time.Minute))
	for _, u := range h.a.planner.Unneeded() {
		if u.Node.Name == "g1-n2" {
			t.Errorf("n2 is unneeded while the pod being evicted from n1 needs it")
		}
	}
	h.runOnce(t0.Add(23 * time.Minute))
	release()
	h.a.actuator.Wait()
	if d := sdtest.Deletions(p); !reflect.DeepEqual(d, []string{"g1:g1-n1"}) {
		t.Fatalf("DeleteNodes calls = %v, want only the drained n1", d)
	}
	if up := increases(p); len(up) != 0 {
		t.Fatalf("IncreaseSize calls = %v, want none", up)
	}
}
