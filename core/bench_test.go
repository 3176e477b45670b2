package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/actuation"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// benchCluster returns 20 groups × 50 nodes (4 cpu, 16 GiB), 30 pods per node
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

// benchShape describes node groups of identical nodes, each running the same number
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
	p, objs := benchCluster(pendingPods)
	return benchHarnessOf(b, p, objs)
}

// benchHarnessOf is a harness for a benchmark on the given cluster, logs
// discarded.
func benchHarnessOf(b *testing.B, p *test.Provider, objs []runtime.Object) *harness {
	b.Helper()
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	b.Cleanup(func() { klog.LogToStderr(true) })
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
	if err := a.newDecisionState(actuation.Synchronous()); err != nil {
		panic(err)
	}
	a.lastScaleUp = t0.Add(-24 * 60 * 60 * 1e9)
}

// BenchmarkRunOnce times one iteration on 1,000 nodes, 30,000 pods and 20 groups,
// with nothing to do, and with 5,000 pending pods to scale up for.
func BenchmarkRunOnce(b *testing.B) {
	b.Run("steady-state", benchmarkRunOnceSteadyState)
	b.Run("5000-pending", benchmarkRunOnceScaleUp)
	b.Run("5000-nodes-first-pending", benchmarkRunOnceFirstPending)
	b.Run("1000-unneeded", func(b *testing.B) { benchmarkRunOnceUnneeded(b, 20, 50, false) })
	b.Run("1000-unneeded-pod-churn", func(b *testing.B) { benchmarkRunOnceUnneeded(b, 20, 50, true) })
	b.Run("5000-unneeded", func(b *testing.B) { benchmarkRunOnceUnneeded(b, 100, 50, false) })
	b.Run("1000-ramp", func(b *testing.B) { benchmarkRunOnceRamp(b, false) })
	b.Run("1000-ramp-consolidation", func(b *testing.B) { benchmarkRunOnceRamp(b, true) })
	b.Run("5000-steady", func(b *testing.B) { benchmarkRunOnceLargeSteady(b, false, false, false) })
	b.Run("5000-steady-consolidation", func(b *testing.B) { benchmarkRunOnceLargeSteady(b, true, false, false) })
	b.Run("5000-steady-consolidation-every-pool", func(b *testing.B) { benchmarkRunOnceLargeSteady(b, true, true, false) })
	b.Run("5000-steady-consolidation-every-pool-replanning", func(b *testing.B) { benchmarkRunOnceLargeSteady(b, true, true, true) })
}

// consolidateEveryPool prices nodes by their cores and lets every node
// group consolidate (hack/bench's --consolidate-pools).
func consolidateEveryPool(p *test.Provider) {
	p.SetPricing(&test.PricingModel{PerCoreHour: 1})
	for _, g := range p.NodeGroups() {
		o := config.Defaults().NodeGroupDefaults
		o.Consolidate = true
		p.Group(g.Id()).SetOptions(&o)
	}
}

// benchmarkRunOnceLargeSteady times loops on hack/bench's --large cluster
// (100 pools of 50 full nodes) where nothing changes, with consolidation
// off or on (issue 44: within 1.3× the loop without it): with no pool
// consolidating, the phase's cost is what it pays before it knows that;
// with every pool consolidating, every node is a candidate that no command
// can remove (they are full, and no size is cheaper). A plan that found
// nothing is not made again while nothing changes, for a stabilization
// window (consolidation.Phase.unchanged); replanning makes the window 0,
// so every loop plans: the cost of a loop after any change.
func benchmarkRunOnceLargeSteady(b *testing.B, consolidation, everyPool, replanning bool) {
	p, objs := benchNodes(benchShape{groups: 100, nodesPerGroup: 50, nodeCPU: 1900, nodeMem: 4 * test.GiB,
		podsPerNode: 2, podCPU: 900, podMem: 256 * test.MiB, replicaSets: 100})
	if everyPool {
		consolidateEveryPool(p)
	}
	h := benchHarnessOf(b, p, objs)
	h.a.opts.Consolidation.Enabled = consolidation
	if replanning {
		h.a.opts.Consolidation.StabilizationWindow = 0
	}
	// Two loops before the timer: the second is the first whose
	// consolidation plans, and builds the snapshot it keeps (once).
	now := t0
	h.runOnce(now)
	now = now.Add(10 * time.Second)
	h.runOnce(now)
	rebuilds := h.a.sync.rebuilds
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(10 * time.Second)
		h.runOnce(now)
	}
	b.StopTimer()
	b.ReportMetric(float64(h.a.sync.rebuilds-rebuilds), "rebuilds")
	if len(increases(h.provider)) != 0 || len(sdtest.Deletions(h.provider)) != 0 {
		b.Fatalf("steady state acted: %v %v", increases(h.provider), sdtest.Deletions(h.provider))
	}
}

// benchmarkRunOnceRamp times loops on the cluster of 1000-unneeded with the production
// candidate limits (--scale-down-non-empty-candidates-count=30): each loop
// finds 30 more unneeded nodes, so the candidates change every loop and the
// whole-loop reuse never applies (hack/bench's window at 1,000 nodes). Ten
// untimed loops first (300 nodes known), then one loop per iteration.
func benchmarkRunOnceRamp(b *testing.B, consolidation bool) {
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	b.Cleanup(func() { klog.LogToStderr(true) })
	p, objs := benchNodes(benchShape{groups: 20, nodesPerGroup: 50, nodeCPU: 2000, nodeMem: 4 * test.GiB,
		podsPerNode: 2, podCPU: 50, podMem: 64 * test.MiB, replicaSets: 100})
	opts := testOptions()
	if consolidation {
		// hack/bench's figures run with --consolidate-pools: every pool
		// consolidates; the phase waits while scale-down has unneeded nodes.
		consolidateEveryPool(p)
		opts.Consolidation.Enabled = true
	}
	h := newHarness(b, opts, p, objs...)
	h.a.recorder = &record.FakeRecorder{}
	h.a.rebuild()
	now := t0
	for i := 0; i < 10; i++ {
		h.runOnce(now)
		now = now.Add(10 * time.Second)
	}
	known, reused := len(h.a.planner.Unneeded()), h.a.planner.Reused()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.runOnce(now)
		now = now.Add(10 * time.Second)
	}
	b.StopTimer()
	if got := len(h.a.planner.Unneeded()); got <= known {
		b.Fatalf("%d unneeded nodes after the timed loops, %d before: not a ramp", got, known)
	}
	if h.a.planner.Reused()-reused < known*b.N {
		b.Fatalf("%d node simulations reused in %d loops, want at least the %d nodes known before each", h.a.planner.Reused()-reused, b.N, known)
	}
	if len(sdtest.Deletions(h.provider)) != 0 {
		b.Fatalf("removed nodes before their unneeded time: %v", sdtest.Deletions(h.provider))
	}
}

// benchmarkRunOnceUnneeded times loops on groups × nodesPerGroup nodes (2 cpu, 4 GiB), each
// running two 50m pods of 100 ReplicaSets, so every node is underutilized and
// its pods fit elsewhere: the steady state of an idle cluster, where every
// loop re-checks every unneeded node before its unneeded time is up. The
// first (untimed) loop finds them all (no candidate limit), the second
// re-checks them as known ones; from then on nothing changes, and a loop
// reuses the previous one's simulations. With churn, one new pod per loop
// (created untimed) makes every loop simulate every node again: the cost
// on a cluster where some pod always changes.
func benchmarkRunOnceUnneeded(b *testing.B, groups, nodesPerGroup int, churn bool) {
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
	if n := len(h.a.planner.Unneeded()); n < groups*nodesPerGroup/2 {
		b.Fatalf("%d unneeded nodes after the first loop; want most of %d", n, groups*nodesPerGroup)
	}
	h.runOnce(t0)
	simulated := h.a.planner.Simulated()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if churn {
			b.StopTimer()
			h.createPod(test.BuildScheduledPod(fmt.Sprintf("churn-%d", i), 10, test.MiB, "rs-churn", "pool-000-n001"))
			b.StartTimer()
		}
		h.runOnce(t0)
	}
	b.StopTimer()
	if got, want := h.a.planner.Simulated()-simulated, map[bool]int{true: b.N, false: 0}[churn]; got != want {
		b.Fatalf("%d of %d loops simulated, want %d", got, b.N, want)
	}
	if len(sdtest.Deletions(h.provider)) != 0 {
		b.Fatalf("removed nodes before their unneeded time: %v", sdtest.Deletions(h.provider))
	}
}

// benchmarkRunOnceSteadyState times a loop with nothing to do.
func benchmarkRunOnceSteadyState(b *testing.B) {
	h := benchHarness(b, 0)
	h.runOnce(t0) // warm caches (templates, first status write)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.runOnce(t0)
	}
	b.StopTimer()
	if len(increases(h.provider)) != 0 || len(sdtest.Deletions(h.provider)) != 0 {
		b.Fatalf("steady state acted: %v %v", increases(h.provider), sdtest.Deletions(h.provider))
	}
}

// benchmarkRunOnceScaleUp times a loop with 5,000 pending pods; every iteration scales up from
// the same starting point.
func benchmarkRunOnceScaleUp(b *testing.B) {
	timeScaleUps(b, benchHarness(b, 5000))
}

// benchmarkRunOnceFirstPending times the first loop of a burst on hack/bench's
// --large cluster: 100 pools of 50 full nodes (two 900m pods on each
// 1,900m node) and the first 20 pods of a stream of 500m pods, which fit
// no existing node: the loop that makes the burst's first UpdateNodePool.
func benchmarkRunOnceFirstPending(b *testing.B) {
	p, objs := benchNodes(benchShape{groups: 100, nodesPerGroup: 50, nodeCPU: 1900, nodeMem: 4 * test.GiB,
		podsPerNode: 2, podCPU: 900, podMem: 256 * test.MiB, replicaSets: 100})
	for i := 0; i < 20; i++ {
		objs = append(objs, test.BuildPendingPod(fmt.Sprintf("pending-%05d", i), 500, 256*test.MiB, "burst"))
	}
	timeScaleUps(b, benchHarnessOf(b, p, objs))
}

// timeScaleUps times h's loops, each of which must scale up; between them
// (untimed) the increases are undone and the decision state rebuilt, so
// every loop starts from the same point.
func timeScaleUps(b *testing.B, h *harness) {
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

// benchDRACluster is benchCluster(0) where the 100 nodes of pool-00 and
// pool-01 are GPU nodes: each publishes a ResourceSlice of 4 NVIDIA GPUs,
// and 3 of its pods hold one each through an allocated claim (300 claim
// pods; 75% of the devices used, so, as in benchCluster, no node is a
// scale-down candidate). withDRA false leaves out the slices, claims and
// class, keeping the same nodes and pods: the baseline.
func benchDRACluster(withDRA bool) (*test.Provider, []runtime.Object) {
	p, objs := benchCluster(0)
	if !withDRA {
		return p, objs
	}
	claimed := map[string]int{}
	out := []runtime.Object{DeviceClass("gpu.nvidia.com", NvidiaDriver)}
	for _, o := range objs {
		switch v := o.(type) {
		case *apiv1.Node:
			if v.Labels["pool"] == "pool-00" || v.Labels["pool"] == "pool-01" {
				out = append(out, NodeSlice(v.Name, NvidiaDriver, 4))
			}
		case *apiv1.Pod:
			if !strings.HasPrefix(v.Spec.NodeName, "pool-00") && !strings.HasPrefix(v.Spec.NodeName, "pool-01") || claimed[v.Spec.NodeName] == 3 {
				break
			}
			name := v.Name + "-gpu"
			WithClaim(v, name)
			device := fmt.Sprintf("gpu-%d", claimed[v.Spec.NodeName])
			claimed[v.Spec.NodeName]++
			out = append(out, Allocated(Claim(name, "gpu.nvidia.com", 1), v.Spec.NodeName, NvidiaDriver, []string{device}, v))
		}
	}
	return p, append(objs, out...)
}

// BenchmarkRunOnceDRA times the steady state of BenchmarkRunOnce with 100 GPU
// nodes publishing devices and 300 pods holding claims, beside the same
// cluster without DRA objects.
func BenchmarkRunOnceDRA(b *testing.B) {
	for _, withDRA := range []bool{false, true} {
		name := "without-dra-objects"
		if withDRA {
			name = "100-gpu-nodes-300-claims"
		}
		b.Run(name, func(b *testing.B) {
			p, objs := benchDRACluster(withDRA)
			h := benchHarnessOf(b, p, objs)
			h.runOnce(t0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h.runOnce(t0)
			}
			b.StopTimer()
			if len(increases(h.provider)) != 0 || len(sdtest.Deletions(h.provider)) != 0 {
				b.Fatalf("steady state acted: %v %v", increases(h.provider), sdtest.Deletions(h.provider))
			}
		})
	}
}
