package core

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// benchCluster: 20 groups × 50 nodes (4 cpu, 16 GiB), 30 pods per node
// (100m, 256 MiB: 75% cpu, so no node is a scale-down candidate) owned by
// 300 ReplicaSets, i.e. 1,000 nodes and 30,000 pods; plus `pending`
// unschedulable pods of 1200m (too big for the 1000m left on any node) in
// deployments of 100.
func benchCluster(pendingPods int) (*test.Provider, []runtime.Object) {
	p, objs := benchNodes(benchShape{groups: 20, nodesPerGroup: 50, nodeCPU: 4000, nodeMem: 16 * test.GiB,
		podsPerNode: 30, podCPU: 100, podMem: 256 * test.MiB, replicaSets: 300})
	for i := 0; i < pendingPods; i++ {
		objs = append(objs, test.BuildPendingPod(fmt.Sprintf("pending-%05d", i), 1200, 512*test.MiB, fmt.Sprintf("batch-%02d", i/100)))
	}
	return p, objs
}

// benchShape: node groups of identical nodes, each running the same number
// of identical pods spread over replicaSets ReplicaSets.
type benchShape struct {
	groups, nodesPerGroup, podsPerNode, replicaSets int
	nodeCPU, nodeMem, podCPU, podMem                int64
}

func benchNodes(sh benchShape) (*test.Provider, []runtime.Object) {
	p := test.NewProvider()
	var objs []runtime.Object
	podIdx := 0
	for g := 0; g < sh.groups; g++ {
		id := fmt.Sprintf("pool-%03d", g)
		p.AddNodeGroup(id, 1, 200, sh.nodesPerGroup, test.BuildTemplate(id, sh.nodeCPU, sh.nodeMem, map[string]string{"pool": id}))
		for n := 0; n < sh.nodesPerGroup; n++ {
			node := test.BuildNode(fmt.Sprintf("%s-n%03d", id, n), sh.nodeCPU, sh.nodeMem)
			node.Labels["pool"] = id
			p.AddNode(id, node)
			objs = append(objs, node)
			for i := 0; i < sh.podsPerNode; i++ {
				objs = append(objs, test.BuildScheduledPod(fmt.Sprintf("app-%05d", podIdx), sh.podCPU, sh.podMem,
					fmt.Sprintf("rs-%03d", podIdx%sh.replicaSets), node.Name))
				podIdx++
			}
		}
	}
	return p, objs
}

func benchHarness(b *testing.B, pendingPods int) *harness {
	b.Helper()
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	b.Cleanup(func() { klog.LogToStderr(true) })
	p, objs := benchCluster(pendingPods)
	o := testOptions()
	h := newHarness(b, o, p, objs...)
	// Events are dropped: a real recorder is rate limited and asynchronous.
	h.a.recorder = &record.FakeRecorder{}
	h.a.rebuild()
	return h
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// rebuild replaces the per-run state (cluster state, scale-up and
// scale-down bookkeeping) so each benchmark iteration starts alike.
func (a *Autoscaler) rebuild() {
	if err := a.newDecisionState(scaledown.Synchronous()); err != nil {
		panic(err)
	}
	a.lastScaleUp = t0.Add(-24 * 60 * 60 * 1e9)
}

// BenchmarkRunOnce: one iteration on 1,000 nodes, 30,000 pods and 20 groups,
// with nothing to do, and with 5,000 pending pods to scale up for.
func BenchmarkRunOnce(b *testing.B) {
	b.Run("steady-state", benchmarkRunOnceSteadyState)
	b.Run("5000-pending", benchmarkRunOnceScaleUp)
	b.Run("1000-unneeded", func(b *testing.B) { benchmarkRunOnceUnneeded(b, 20, 50) })
	b.Run("5000-unneeded", func(b *testing.B) { benchmarkRunOnceUnneeded(b, 100, 50) })
}

// benchmarkRunOnceUnneeded: groups × nodesPerGroup nodes (2 cpu, 4 GiB), each
// running two 50m pods of 100 ReplicaSets, so every node is underutilized and
// its pods fit elsewhere: the steady state of an idle cluster, where every
// loop re-checks every unneeded node before its unneeded time is up. The
// first (untimed) loop finds them all (no candidate limit).
func benchmarkRunOnceUnneeded(b *testing.B, groups, nodesPerGroup int) {
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	b.Cleanup(func() { klog.LogToStderr(true) })
	p, objs := benchNodes(benchShape{groups: groups, nodesPerGroup: nodesPerGroup, nodeCPU: 2000, nodeMem: 4 * test.GiB,
		podsPerNode: 2, podCPU: 50, podMem: 64 * test.MiB, replicaSets: 100})
	o := testOptions()
	o.ScaleDownNonEmptyCandidatesCount = 0
	o.ScaleDownCandidatesPoolRatio = 1
	h := newHarness(b, o, p, objs...)
	h.a.recorder = &record.FakeRecorder{}
	h.a.rebuild()
	h.runOnce(t0)
	if n := len(h.a.scaleDown.Planner.Unneeded()); n < groups*nodesPerGroup/2 {
		b.Fatalf("%d unneeded nodes after the first loop; want most of %d", n, groups*nodesPerGroup)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.runOnce(t0)
	}
	b.StopTimer()
	if len(deletions(h.provider)) != 0 {
		b.Fatalf("removed nodes before their unneeded time: %v", deletions(h.provider))
	}
}

// benchmarkRunOnceSteadyState: nothing to do.
func benchmarkRunOnceSteadyState(b *testing.B) {
	h := benchHarness(b, 0)
	h.runOnce(t0) // warm caches (templates, first status write)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.runOnce(t0)
	}
	b.StopTimer()
	if len(increases(h.provider)) != 0 || len(deletions(h.provider)) != 0 {
		b.Fatalf("steady state acted: %v %v", increases(h.provider), deletions(h.provider))
	}
}

// benchmarkRunOnceScaleUp: 5,000 pending pods; every iteration scales up from
// the same starting point.
func benchmarkRunOnceScaleUp(b *testing.B) {
	h := benchHarness(b, 5000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.runOnce(t0)
		b.StopTimer()
		incs := h.provider.CallsOf("IncreaseSize")
		if len(incs) == 0 {
			b.Fatal("no scale-up")
		}
		if i == 0 {
			b.Logf("scale-up: %v", increases(h.provider))
		}
		for _, c := range incs {
			if err := h.provider.Group(c.Group).DecreaseTargetSize(-c.Delta); err != nil {
				b.Fatal(err)
			}
		}
		h.provider.ResetCalls()
		h.a.rebuild()
		b.StartTimer()
	}
}
