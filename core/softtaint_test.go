package core

import (
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// Unneeded nodes get the PreferNoSchedule DeletionCandidate taint as soon
// as they are found unneeded (well before their unneeded time), and lose it
// when they are needed again; --max-bulk-soft-taint-count=0 turns it off.
func TestUnneededNodesAreSoftTainted(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	for name, want := range map[string]bool{"g1-n0": false, "g1-n1": true, "g1-n2": true} {
		if got := hasTaint(h.node(name), clusterstate.DeletionCandidateTaint); got != want {
			t.Errorf("after the first loop: node %s soft-tainted = %v, want %v", name, got, want)
		}
	}
	h.waitCache("soft taints", func() bool {
		n, err := h.a.cache.nodes.Get("g1-n2")
		return err == nil && hasTaint(n, clusterstate.DeletionCandidateTaint)
	})
	// A pod lands on n2: it is needed again.
	h.createPod(test.BuildScheduledPod("newcomer", 1500, test.GiB, "rs-new", "g1-n2"))
	h.runOnce(t0.Add(time.Minute))
	if hasTaint(h.node("g1-n2"), clusterstate.DeletionCandidateTaint) {
		t.Error("node g1-n2 is needed again but kept its soft taint")
	}
	if !hasTaint(h.node("g1-n1"), clusterstate.DeletionCandidateTaint) {
		t.Error("node g1-n1 is still unneeded but lost its soft taint")
	}
}

func TestSoftTaintsOff(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	o := testOptions()
	o.MaxBulkSoftTaintCount = 0
	h := newHarness(t, o, p, objs...)
	h.runOnce(t0)
	for _, name := range []string{"g1-n0", "g1-n1", "g1-n2"} {
		if hasTaint(h.node(name), clusterstate.DeletionCandidateTaint) {
			t.Errorf("node %s soft-tainted with --max-bulk-soft-taint-count=0", name)
		}
	}
}
