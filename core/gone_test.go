package core

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// A node whose instance the cloud deleted (someone else did, or this
// autoscaler and the taint was lost) is gone, though its Node object
// lingers, untainted and Ready until the node controller notices: scale-down
// does not drain a node onto it, and it takes no room.
func TestNodeWhoseInstanceIsGoneIsNoDestination(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 5, nodes: 2, milliCPU: 4000, mem: 4 * test.GiB})
	gone := nodes[1].(*apiv1.Node)
	if err := p.Group("g1").DeleteNodes([]*apiv1.Node{gone}); err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.ScaleDownDelayAfterAdd = 0
	// g1-n0 is a quarter used: unneeded if its pod may move to g1-n1.
	objs := join(nodes, []runtime.Object{test.BuildScheduledPod("web", 1000, test.GiB/2, "web-rs", "g1-n0")})
	h := newHarness(t, opts, p, objs...)
	for i := range 3 {
		h.runOnce(t0.Add(time.Duration(i) * 11 * time.Minute))
	}
	if ev := h.evicts.Evictions(); len(ev) != 0 {
		t.Fatalf("evictions %v onto a node whose instance is gone", ev)
	}
}
