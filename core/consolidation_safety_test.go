package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// Scale-down deletes an empty node of a group not opted in to consolidation;
// consolidation's command would move a pod onto it. Consolidation waits
// while scale-down has unneeded nodes to remove, and plans on the cluster
// scale-down leaves (the iteration's view), so the pod is not evicted to a
// node that is going away.
func TestConsolidationSeesScaleDownsRemovalsInTheSameLoop(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "plain", min: 0, max: 3, nodes: 1, milliCPU: 4000, mem: 4 * test.GiB},
		groupSpec{id: "c", min: 0, max: 3, nodes: 2, milliCPU: 2000, mem: 2 * test.GiB},
	)
	p.SetPricing(&test.PricingModel{PerCoreHour: 1})
	opts := testOptions()
	opts.NodeGroupDefaults.ScaleDownUnneededTime = time.Minute
	o := opts.NodeGroupDefaults
	o.Consolidate = true
	p.Group("c").SetOptions(&o)
	opts.Consolidation.Enabled = true
	opts.Consolidation.StabilizationWindow = time.Minute
	pods := []runtime.Object{
		// 75 % of its node: scale-down keeps c-n0; only the empty
		// plain-n0 can take web.
		test.BuildScheduledPod("web", 1500, test.GiB/2, "web-rs", "c-n0"),
		test.BuildScheduledPod("full", 2000, test.GiB/2, "full-rs", "c-n1"),
	}
	h := newHarness(t, opts, p, join(nodes, pods)...)
	h.runOnce(t0)
	if n := countEvents(h.events(), "ConsolidationPlanned"); n != 0 {
		t.Fatalf("consolidation planned %d command(s) while scale-down had an unneeded node to remove", n)
	}
	h.runOnce(t0.Add(61 * time.Second))
	if calls := h.provider.CallsOf("DeleteNodes"); len(calls) != 1 || strings.Join(calls[0].Nodes, ",") != "plain-n0" {
		t.Fatalf("DeleteNodes calls %v, want scale-down's one for plain-n0", calls)
	}
	if ev := h.evicts.Evictions(); len(ev) != 0 {
		t.Fatalf("evictions %v: a pod was moved onto the node scale-down removed in the same loop", ev)
	}
	if hasTaint(h.node("c-n0"), clusterstate.ToBeDeletedTaint) {
		t.Error("c-n0 was tainted for removal though its pod has nowhere to go")
	}
}

// While a Replace command's replacement boots, its old node belongs to the
// command: scale-down neither drains it (room appeared elsewhere) nor
// counts it as room for other nodes' pods.
func TestScaleDownLeavesTheNodesOfACommandInFlight(t *testing.T) {
	h, _ := consolidationCluster(t)
	for _, id := range []string{"big", "small"} {
		o := config.Defaults().NodeGroupDefaults
		o.Consolidate = true
		o.ScaleDownUnneededTime = time.Minute
		h.provider.Group(id).SetOptions(&o)
	}
	h.runOnce(t0)
	h.runOnce(t0.Add(61 * time.Second))
	if strings.Join(increases(h.provider), ",") != "small+1" {
		t.Fatalf("setup: increases %v, want small+1", increases(h.provider))
	}
	// Room appears on a node of no group: scale-down alone would now
	// move web there and drain big.
	h.createNode(test.BuildNode("room", 4000, 4*test.GiB))
	for _, after := range []time.Duration{90 * time.Second, 160 * time.Second, 230 * time.Second} {
		h.runOnce(t0.Add(after))
	}
	if hasTaint(h.node("big-n0"), clusterstate.ToBeDeletedTaint) || len(h.evicts.Evictions()) != 0 {
		t.Fatalf("scale-down drained the old node of a command in flight (evictions %v)", h.evicts.Evictions())
	}
	if cmd, _, _ := h.a.consolidation.InFlight(); cmd == nil {
		t.Fatalf("the command was dropped: %s", h.a.consolidation.LastResult())
	}
}

// A replacement is asked for only if it fits the cluster-wide maxima
// beside the node it replaces (make before break).
func TestConsolidationReplacementRespectsClusterLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(o *config.AutoscalingOptions)
	}{
		{"--max-nodes-total", func(o *config.AutoscalingOptions) { o.MaxNodesTotal = 2 }},
		{"--cores-total max", func(o *config.AutoscalingOptions) { o.MaxCoresTotal = 11 }},
		{"--memory-total max", func(o *config.AutoscalingOptions) { o.MaxMemoryTotal = 11 * test.GiB }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := consolidationCluster(t)
			tc.set(&h.a.opts)
			h.runOnce(t0)
			h.runOnce(t0.Add(61 * time.Second))
			// Within the limit, the best command deletes the small node
			// (its pod fits the big one's room).
			if incs := increases(h.provider); len(incs) != 0 {
				t.Fatalf("increases %v past %s", incs, tc.name)
			}
		})
	}
}

// Deletes keep the cluster at or above --cores-total's minimum.
func TestConsolidationDeleteRespectsMinimums(t *testing.T) {
	h, _, _ := deleteCluster(t)
	h.a.opts.MinCoresTotal = 8 // 2 nodes of 4 cpu: neither may go
	for i := range 4 {
		h.runOnce(t0.Add(time.Duration(i) * 61 * time.Second))
	}
	if len(h.evicts.Evictions()) != 0 || len(h.provider.CallsOf("DeleteNodes")) != 0 {
		t.Fatalf("consolidation went below --cores-total's minimum: evictions %v", h.evicts.Evictions())
	}
	h2, _, _ := deleteCluster(t)
	for i := range 4 {
		h2.runOnce(t0.Add(time.Duration(i) * 61 * time.Second))
	}
	if len(h2.provider.CallsOf("DeleteNodes")) != 1 {
		t.Fatalf("without the minimum the delete does not happen: the test proves nothing")
	}
}

// deleteCluster: a consolidatable group of two 4-cpu nodes, each a
// quarter used: one may go.
func deleteCluster(t *testing.T) (*harness, config.AutoscalingOptions, *test.Provider) {
	p, nodes := cluster(groupSpec{id: "g", min: 0, max: 3, nodes: 2, milliCPU: 4000, mem: 4 * test.GiB})
	p.SetPricing(&test.PricingModel{PerCoreHour: 1})
	o := config.Defaults().NodeGroupDefaults
	o.Consolidate = true
	// Scale-down would remove a node too: left to consolidation here.
	o.ScaleDownUtilizationThreshold = 0.1
	// A delete waits the stabilization window and at least this.
	o.ScaleDownUnneededTime = time.Minute
	p.Group("g").SetOptions(&o)
	pods := []runtime.Object{
		test.BuildScheduledPod("a", 1000, test.GiB/2, "a-rs", "g-n0"),
		test.BuildScheduledPod("b", 1000, test.GiB/2, "b-rs", "g-n1"),
	}
	opts := testOptions()
	opts.Consolidation.Enabled = true
	opts.Consolidation.StabilizationWindow = time.Minute
	opts.Consolidation.MaxDisrupted = config.DisruptionBudget{Count: 1}
	return newHarness(t, opts, p, join(nodes, pods)...), opts, p
}

// A replacement that registers Ready but still carries a startup taint is
// not ready, by the same rule the cluster state registry applies: the
// command waits for it, and drains once the taint is gone.
func TestConsolidationWaitsForAReplacementsStartupTaint(t *testing.T) {
	h, _ := consolidationCluster(t)
	h.runOnce(t0)
	h.runOnce(t0.Add(61 * time.Second))
	if strings.Join(increases(h.provider), ",") != "small+1" {
		t.Fatalf("setup: increases %v, want small+1", increases(h.provider))
	}
	n := test.BuildNode("small-new-1", 2000, 2*test.GiB)
	n.Spec.ProviderID = "test://small-new-1"
	n.CreationTimestamp = metav1.NewTime(t0.Add(90 * time.Second))
	n.Spec.Taints = []apiv1.Taint{{Key: clusterstate.StartupTaintPrefix + "agent", Effect: apiv1.TaintEffectNoSchedule}}
	h.createNode(n)
	h.runOnce(t0.Add(2 * time.Minute))
	h.runOnce(t0.Add(3 * time.Minute))
	if cmd, phase, _ := h.a.consolidation.InFlight(); cmd == nil || phase != "Provisioning" {
		t.Fatalf("with the replacement still starting: in flight %v %q, last result %q; want it waiting", cmd, phase, h.a.consolidation.LastResult())
	}
	if len(h.evicts.Evictions()) != 0 {
		t.Fatal("pods moved to a replacement that is not ready")
	}
	n = h.node("small-new-1").DeepCopy()
	n.Spec.Taints = nil
	h.updateNode(n)
	h.runOnce(t0.Add(4 * time.Minute))
	if ev := h.evicts.Evictions(); strings.Join(ev, ",") != "default/web" {
		t.Fatalf("evictions %v once the replacement is ready, want default/web", ev)
	}
}

// An aborted command is not tried again within its backoff: its
// replacement is not bought again and again.
func TestConsolidationAbortedCommandBacksOff(t *testing.T) {
	h, _ := consolidationCluster(t)
	h.provider.Group("small").InjectError("IncreaseSize", errors.New("422 droplet limit"))
	for i := range 10 {
		h.runOnce(t0.Add(time.Duration(i) * 61 * time.Second))
	}
	if n := len(increases(h.provider)); n != 1 {
		t.Fatalf("%d IncreaseSize calls over 10 minutes, want 1 (then backed off)", n)
	}
	h.provider.Group("small").InjectError("IncreaseSize", nil)
	h.runOnce(t0.Add(61*time.Minute + 30*time.Second))
	h.runOnce(t0.Add(63 * time.Minute))
	if n := len(increases(h.provider)); n != 2 {
		t.Fatalf("%d IncreaseSize calls after the backoff, want the command tried again", n)
	}
}

// A node whose removal scale-down started in the same iteration still
// counts against the maxima when consolidation plans: the removal may
// fail (here DigitalOcean refuses it), and the replacement must not take
// the cluster past --max-nodes-total then.
func TestConsolidationCountsScaleDownsRemovalsAgainstMaxima(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "plain", min: 0, max: 3, nodes: 1, milliCPU: 1000, mem: test.GiB},
		groupSpec{id: "big", min: 0, max: 3, nodes: 1, milliCPU: 8000, mem: 8 * test.GiB},
		groupSpec{id: "small", min: 0, max: 5, nodes: 1, milliCPU: 2000, mem: 2 * test.GiB},
	)
	p.SetPricing(&test.PricingModel{PerCoreHour: 1})
	opts := testOptions()
	opts.NodeGroupDefaults.ScaleDownUnneededTime = time.Minute
	for _, id := range []string{"big", "small"} {
		o := opts.NodeGroupDefaults
		o.Consolidate = true
		o.ScaleDownUtilizationThreshold = 0.1
		p.Group(id).SetOptions(&o)
	}
	opts.Consolidation.Enabled = true
	// A command acts in the iteration that plans it.
	opts.Consolidation.StabilizationWindow = 0
	opts.MaxNodesTotal = 3
	full := test.BuildScheduledPod("full", 2000, test.GiB/2, "full-rs", "small-n0")
	full.Annotations = map[string]string{drain.DoNotDisruptKey: "true"}
	pods := []runtime.Object{test.BuildScheduledPod("web", 1500, test.GiB/2, "web-rs", "big-n0"), full}
	h := newHarness(t, opts, p, join(nodes, pods)...)
	p.Group("plain").InjectError("DeleteNodes", errors.New("500 internal error"))
	h.runOnce(t0)
	h.runOnce(t0.Add(61 * time.Second))
	if calls := h.provider.CallsOf("DeleteNodes"); len(calls) == 0 {
		t.Fatal("setup: scale-down did not try to remove the empty node")
	}
	if incs := increases(h.provider); len(incs) != 0 {
		t.Fatalf("increases %v with 3 nodes at --max-nodes-total=3 and a removal that failed", incs)
	}
}

// Scale-down drains a node; its pod's replacement lands on a node
// consolidation would remove. The workload was just disrupted, by
// scale-down: consolidation leaves it for --consolidation-workload-cooldown
// (issue 34's run evicted such a pod twice, a scale-down drain then a
// command 2.5 minutes later), and moves it once the cooldown has passed.
func TestConsolidationCooldownCountsScaleDownsEvictions(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g", min: 0, max: 4, nodes: 3, milliCPU: 4000, mem: 4 * test.GiB})
	p.SetPricing(&test.PricingModel{PerCoreHour: 1})
	o := config.Defaults().NodeGroupDefaults
	o.Consolidate = true
	// Scale-down removes g-n0 (5 %), not g-n1 or g-n2 (25 % and more).
	o.ScaleDownUtilizationThreshold = 0.1
	o.ScaleDownUnneededTime = time.Minute
	p.Group("g").SetOptions(&o)
	keep := test.BuildScheduledPod("b", 1000, test.GiB/2, "b-rs", "g-n2")
	keep.Annotations = map[string]string{drain.DoNotDisruptKey: "true"} // consolidation's only candidate is g-n1
	pods := []runtime.Object{
		test.BuildScheduledPod("w", 200, test.GiB/4, "w-rs", "g-n0"),
		test.BuildScheduledPod("a", 1000, test.GiB/2, "a-rs", "g-n1"),
		keep,
	}
	opts := testOptions()
	opts.Consolidation.Enabled = true
	opts.Consolidation.StabilizationWindow = time.Minute
	opts.Consolidation.WorkloadCooldown = 10 * time.Minute
	h := newHarness(t, opts, p, join(nodes, pods)...)

	h.runOnce(t0)
	h.runOnce(t0.Add(61 * time.Second))
	if ev := h.evicts.Evictions(); len(ev) != 1 || !strings.Contains(ev[0], "w") {
		t.Fatalf("evictions %v, want scale-down's of w", ev)
	}
	// w's ReplicaSet replaces it; the scheduler puts it on g-n1.
	h.createPod(test.BuildScheduledPod("w-2", 200, test.GiB/4, "w-rs", "g-n1"))
	for at := 2 * time.Minute; at <= 6*time.Minute; at += time.Minute {
		h.runOnce(t0.Add(at))
	}
	for _, e := range h.evicts.Evictions() {
		if strings.Contains(e, "w-2") {
			t.Fatalf("consolidation evicted w-2 within the cooldown of scale-down's eviction of w: evictions %v", h.evicts.Evictions())
		}
	}
	// Past the cooldown, g-n1 is a candidate again.
	for at := 12 * time.Minute; at <= 15*time.Minute; at += time.Minute {
		h.runOnce(t0.Add(at))
	}
	if ev := strings.Join(h.evicts.Evictions(), " "); !strings.Contains(ev, "w-2") {
		t.Fatalf("evictions %v: consolidation did not remove g-n1 once the cooldown had passed", h.evicts.Evictions())
	}
}
