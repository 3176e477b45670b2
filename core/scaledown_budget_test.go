package core

import (
	"fmt"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// lightCluster: n0 half used (not a candidate) with room for the others'
// pods, then nodes n1..n<light> each running one small pod; every one of
// them can be drained.
func lightCluster(light int) (*test.Provider, []runtime.Object) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 20, nodes: light + 1, milliCPU: 2000, mem: 4 * test.GiB})
	objs := join(nodes, fill(nodes[:1], 1000))
	for i := 1; i <= light; i++ {
		objs = append(objs, test.BuildScheduledPod(fmt.Sprintf("light-%d", i), 100, 64*test.MiB, "rs-light", fmt.Sprintf("g1-n%d", i)))
	}
	return p, objs
}

// --max-drain-parallelism: that many non-empty nodes are drained at once
// (upstream's default is 1).
func TestMaxDrainParallelism(t *testing.T) {
	for _, tc := range []struct {
		parallelism, want int
	}{{1, 1}, {2, 2}, {5, 3}} {
		t.Run(fmt.Sprintf("max-drain-parallelism=%d", tc.parallelism), func(t *testing.T) {
			p, objs := lightCluster(3)
			o := testOptions()
			o.MaxDrainParallelism = tc.parallelism
			h := newHarness(t, o, p, objs...)
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := deletions(p); len(d) != tc.want {
				t.Fatalf("DeleteNodes calls in the first removal loop = %v, want %d", d, tc.want)
			}
			if len(h.evictions) != tc.want {
				t.Fatalf("evictions = %v, want %d", h.evictions, tc.want)
			}
		})
	}
}

// --max-scale-down-parallelism bounds the removals in flight, not those
// started per loop: while two drains still run, a later loop starts none.
func TestMaxScaleDownParallelismCountsRemovalsInFlight(t *testing.T) {
	p, objs := lightCluster(4)
	o := testOptions()
	o.MaxScaleDownParallelism = 2
	o.MaxDrainParallelism = 10
	o.MaxPodEvictionTime = time.Minute
	h := newAsyncHarness(t, o, p, objs...)
	read := scrape(t)
	release := h.refuseEvictions()
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if n, _ := h.a.removals.InFlight(); n != 2 {
		t.Fatalf("removals in flight after the first removal loop = %d, want 2", n)
	}
	h.runOnce(t0.Add(12 * time.Minute))
	if n, _ := h.a.removals.InFlight(); n != 2 {
		t.Fatalf("removals in flight after a second loop = %d, want still 2", n)
	}
	if v := read("pending_node_deletions", nil); v != 2 {
		t.Errorf("pending_node_deletions = %v after a loop with 2 removals in flight, want 2", v)
	}
	release()
	h.a.actuator.Wait()
	if d := deletions(p); len(d) != 2 {
		t.Fatalf("DeleteNodes calls = %v, want 2", d)
	}
}

// In an idle cluster every unneeded node ends up tracked: nodes already
// unneeded are checked again each loop without using the per-loop limit, so
// --scale-down-non-empty-candidates-count more are found every loop.
func TestIdleClusterTracksEveryUnneededNode(t *testing.T) {
	p, objs := lightCluster(9)
	o := testOptions()
	o.ScaleDownNonEmptyCandidatesCount = 2
	o.ScaleDownCandidatesPoolRatio = 0
	o.ScaleDownCandidatesPoolMinCount = 3
	h := newHarness(t, o, p, objs...)
	var got []int
	for i := 0; i < 6; i++ {
		h.runOnce(t0.Add(time.Duration(i) * time.Second))
		got = append(got, len(h.a.planner.Unneeded()))
	}
	// n1..n9 each hold one light pod that fits on n0: all nine can go.
	want := []int{2, 4, 6, 8, 9, 9}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("unneeded nodes after each loop = %v, want %v", got, want)
	}
	// The first ones found keep their time.
	first := h.a.planner.Unneeded()
	sort.Slice(first, func(i, j int) bool { return first[i].Since.Before(first[j].Since) })
	if !first[0].Since.Equal(t0) {
		t.Errorf("earliest unneeded since %v, want %v", first[0].Since, t0)
	}
}

// The candidate pool bounds the nodes simulated per loop: with a pool of 3
// and no count limit, 3 new nodes are examined (and found) each loop.
func TestCandidatePoolBoundsSimulationsPerLoop(t *testing.T) {
	p, objs := lightCluster(9)
	o := testOptions()
	o.ScaleDownNonEmptyCandidatesCount = 0
	o.ScaleDownCandidatesPoolRatio = 0.3 // of 10 nodes
	o.ScaleDownCandidatesPoolMinCount = 1
	h := newHarness(t, o, p, objs...)
	h.runOnce(t0)
	if n := len(h.a.planner.Unneeded()); n != 3 {
		t.Fatalf("unneeded after one loop = %d, want 3 (pool of ceil(10 × 0.3))", n)
	}
}

// --blocking-system-pod-distruption-timeout: a kube-system pod without a PDB
// keeps its node only until it is older than the timeout; from then the node
// is unneeded, and after --scale-down-unneeded-time it is drained.
func TestSystemPodBlocksOnlyUntilTimeout(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
	dns := test.BuildScheduledPod("dns", 200, 256*test.MiB, "rs-dns", "g1-n1")
	dns.Namespace = metav1.NamespaceSystem
	dns.CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Minute))
	o := testOptions()
	o.BspDisruptionTimeout = 20 * time.Minute
	h := newHarness(t, o, p, join(nodes, fill(nodes[:1], 1000), []runtime.Object{dns})...)
	h.runOnce(t0)                       // 10m old: blocks
	h.runOnce(t0.Add(9 * time.Minute))  // 19m old: blocks
	h.runOnce(t0.Add(11 * time.Minute)) // 21m old: unneeded from now
	if d := deletions(p); len(d) != 0 {
		t.Fatalf("node removed while its kube-system pod was younger than the timeout: %v", d)
	}
	if un := h.a.planner.Unneeded(); len(un) != 1 || un[0].Node.Name != "g1-n1" || !un[0].Since.Equal(t0.Add(11*time.Minute)) {
		t.Fatalf("unneeded = %v, want g1-n1 since the pod passed the timeout", un)
	}
	h.runOnce(t0.Add(22 * time.Minute))
	if d := deletions(p); fmt.Sprint(d) != "[g1:g1-n1]" {
		t.Fatalf("DeleteNodes calls = %v, want g1-n1", d)
	}
	if fmt.Sprint(h.evictions) != "[kube-system/dns]" {
		t.Fatalf("evictions = %v", h.evictions)
	}
}
