package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// consolidationCluster: group "big" with one 8-cpu node running a 1.5-cpu
// pod, group "small" with one full 2-cpu node and room for more; both
// consolidatable, nodes priced by the core-hour. Replacing the big node by a
// small one saves $6 of $8 an hour.
func consolidationCluster(t *testing.T, tune ...func(*config.AutoscalingOptions)) (*harness, config.AutoscalingOptions) {
	p, nodes := cluster(
		groupSpec{id: "big", min: 0, max: 3, nodes: 1, milliCPU: 8000, mem: 8 * test.GiB},
		groupSpec{id: "small", min: 0, max: 5, nodes: 1, milliCPU: 2000, mem: 2 * test.GiB},
	)
	p.SetPricing(&test.PricingModel{PerCoreHour: 1})
	for _, id := range []string{"big", "small"} {
		o := config.Defaults().NodeGroupDefaults
		o.Consolidate = true
		p.Group(id).SetOptions(&o)
	}
	pods := []runtime.Object{
		test.BuildScheduledPod("web", 1500, test.GiB/2, "web-rs", "big-n0"),
		test.BuildScheduledPod("full", 2000, test.GiB/2, "full-rs", "small-n0"),
	}
	opts := testOptions()
	opts.Consolidation.Enabled = true
	opts.Consolidation.StabilizationWindow = time.Minute
	for _, f := range tune {
		f(&opts)
	}
	h := newHarness(t, opts, p, join(nodes, pods)...)
	return h, opts
}

// A replacement is made before the old node is drained, after the command
// held for the stabilization window, and the saving is reported.
func TestConsolidationReplacesMakeBeforeBreak(t *testing.T) {
	h, _ := consolidationCluster(t)
	h.runOnce(t0)
	if ev := h.events(); countEvents(ev, "ConsolidationPlanned") == 0 || countEvents(ev, "saving $6.0000/h") == 0 {
		t.Fatalf("no ConsolidationPlanned event with the saving: %v", ev)
	}
	h.runOnce(t0.Add(30 * time.Second))
	if incs := increases(h.provider); len(incs) != 0 {
		t.Fatalf("acted within the stabilization window: %v", incs)
	}
	h.runOnce(t0.Add(61 * time.Second))
	if incs := increases(h.provider); strings.Join(incs, ",") != "small+1" {
		t.Fatalf("increases %v, want small+1", incs)
	}
	if len(h.evicts.Evictions()) != 0 || hasTaint(h.node("big-n0"), clusterstate.ToBeDeletedTaint) {
		t.Fatal("the old node was touched before its replacement was Ready")
	}
	// Loops while the replacement comes ask for nothing more.
	h.runOnce(t0.Add(90 * time.Second))
	if n := len(increases(h.provider)); n != 1 {
		t.Fatalf("%d increases while waiting, want the one", n)
	}
	n := test.BuildNode("small-new-1", 2000, 2*test.GiB)
	n.Spec.ProviderID = "test://small-new-1"
	h.createNode(n)
	h.runOnce(t0.Add(2 * time.Minute))
	if ev := h.evicts.Evictions(); strings.Join(ev, ",") != "default/web" {
		t.Fatalf("evictions %v, want default/web", ev)
	}
	if calls := h.provider.CallsOf("DeleteNodes"); len(calls) != 1 {
		t.Fatalf("DeleteNodes calls %v, want one for big-n0", calls)
	}
	h.runOnce(t0.Add(3 * time.Minute))
	ev := h.events()
	if countEvents(ev, "Consolidated") == 0 {
		t.Fatalf("no Consolidated event: %v", ev)
	}
	st := h.a.registry.GetStatus(t0.Add(3 * time.Minute)).Consolidation
	if st == nil || st.SavingsPerHour != "6.0000" || !strings.Contains(st.LastResult, "succeeded") {
		t.Errorf("status section %+v", st)
	}
}

// A replacement the cloud refuses aborts the command before any pod moves:
// the old node keeps its pods and no taint.
func TestConsolidationAbortedReplacementLeavesPodsRunning(t *testing.T) {
	h, _ := consolidationCluster(t)
	h.provider.Group("small").InjectError("IncreaseSize", errors.New("422 droplet limit"))
	h.runOnce(t0)
	h.runOnce(t0.Add(61 * time.Second))
	ev := h.events()
	if countEvents(ev, "ConsolidationAborted") == 0 {
		t.Fatalf("no ConsolidationAborted event: %v", ev)
	}
	if len(h.evicts.Evictions()) != 0 || hasTaint(h.node("big-n0"), clusterstate.ToBeDeletedTaint) || !h.podExists("default", "web") {
		t.Fatal("an aborted replacement touched the old node")
	}
	if st := h.a.registry.GetStatus(t0).Consolidation; st == nil || !strings.Contains(st.LastResult, "aborted") || st.Status != "Idle" {
		t.Errorf("status section %+v", st)
	}
}

// Off by default: no section in the status, no event, no cloud call.
func TestConsolidationOffByDefault(t *testing.T) {
	h, _ := consolidationCluster(t)
	h.a.opts.Consolidation.Enabled = false
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Minute))
	if countEvents(h.events(), "Consolidation") != 0 || len(increases(h.provider)) != 0 {
		t.Error("consolidation acted while off")
	}
	if h.a.registry.GetStatus(t0).Consolidation != nil {
		t.Error("the status has a consolidation section while off")
	}
}

// A pod marked not to be disrupted keeps its node.
func TestConsolidationLeavesDoNotDisruptPods(t *testing.T) {
	h, _ := consolidationCluster(t)
	web, err := h.a.cache.pods.Pods("default").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	web = web.DeepCopy()
	web.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": "true"}
	if _, err := h.kube.CoreV1().Pods("default").Update(h.ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCache("annotated pod", func() bool {
		p, err := h.a.cache.pods.Pods("default").Get("web")
		return err == nil && p.Annotations["karpenter.sh/do-not-disrupt"] == "true"
	})
	h.runOnce(t0)
	h.runOnce(t0.Add(2 * time.Minute))
	// The small node's pod fits the big node's free room: that node may go;
	// the big node, holding the marked pod, stays with it.
	for _, e := range h.evicts.Evictions() {
		if e == "default/web" {
			t.Error("the do-not-disrupt pod was evicted")
		}
	}
	if len(increases(h.provider)) != 0 || hasTaint(h.node("big-n0"), clusterstate.ToBeDeletedTaint) {
		t.Error("the node holding a do-not-disrupt pod was consolidated")
	}
}

// Outside every window nothing is planned; the status says why.
func TestConsolidationOutsideWindows(t *testing.T) {
	h, _ := consolidationCluster(t)
	// t0 is 00:13 UTC: a noon window is closed.
	w, err := config.ParseWindow("0 12 * * *=1h")
	if err != nil {
		t.Fatal(err)
	}
	h.a.opts.Consolidation.Windows = []config.Window{w}
	h.runOnce(t0)
	h.runOnce(t0.Add(2 * time.Minute))
	if countEvents(h.events(), "ConsolidationPlanned") != 0 || len(increases(h.provider)) != 0 {
		t.Error("consolidation planned outside its window")
	}
	if st := h.a.registry.GetStatus(t0).Consolidation; st == nil || st.Status != "OutsideWindow" {
		t.Errorf("status %+v, want OutsideWindow", st)
	}
}

// A scale-up within the stabilization window holds consolidation back, and
// the command's window starts again after it: no flapping against
// scale-up.
func TestConsolidationWaitsAfterScaleUp(t *testing.T) {
	h, _ := consolidationCluster(t)
	h.runOnce(t0)
	h.a.lastScaleUp = t0.Add(30 * time.Second)
	h.runOnce(t0.Add(61 * time.Second))
	if len(increases(h.provider)) != 0 {
		t.Fatal("acted within the stabilization window after a scale-up")
	}
	if st := h.a.registry.GetStatus(t0).Consolidation; st == nil || st.Status != "Waiting" {
		t.Errorf("status %+v, want Waiting", st)
	}
	// Planned again once the scale-up is a window old, then a window later it acts.
	h.runOnce(t0.Add(91 * time.Second))
	h.runOnce(t0.Add(140 * time.Second))
	if len(increases(h.provider)) != 0 {
		t.Fatal("acted before the command held for a whole window")
	}
	h.runOnce(t0.Add(152 * time.Second))
	if strings.Join(increases(h.provider), ",") != "small+1" {
		t.Fatalf("increases %v, want small+1 once the command held a window", increases(h.provider))
	}
}

// A replacement waits for its group's own provision time
// (max_node_provision_time_by_size), not --max-node-provision-time: a size
// that takes 45 minutes to come is not given up at the default's 15 (plus
// --max-node-startup-time's 15).
func TestConsolidationReplacementWaitsItsGroupsProvisionTime(t *testing.T) {
	h, _ := consolidationCluster(t)
	o := config.Defaults().NodeGroupDefaults
	o.Consolidate = true
	o.MaxNodeProvisionTime = 45 * time.Minute
	h.provider.Group("small").SetOptions(&o)
	h.runOnce(t0)
	asked := t0.Add(61 * time.Second)
	h.runOnce(asked)
	if incs := increases(h.provider); strings.Join(incs, ",") != "small+1" {
		t.Fatalf("increases %v, want small+1", incs)
	}
	h.runOnce(asked.Add(40 * time.Minute))
	if ev := h.events(); countEvents(ev, "ConsolidationAborted") != 0 {
		t.Fatalf("aborted within the group's provision time: %v", ev)
	}
	h.runOnce(asked.Add(61 * time.Minute))
	if ev := h.events(); countEvents(ev, "Ready after 1h0m0s") == 0 {
		t.Fatalf("not aborted once the group's 45m and the 15m start-up passed: %v", ev)
	}
}

// Enabled, but no node group consolidates: the phase plans nothing, says
// it is idle in the status, and sends no cloud call.
func TestConsolidationIdleWhenNoGroupConsolidates(t *testing.T) {
	h, _ := consolidationCluster(t)
	for _, id := range []string{"big", "small"} {
		o := config.Defaults().NodeGroupDefaults
		h.provider.Group(id).SetOptions(&o)
	}
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Minute))
	if countEvents(h.events(), "Consolidation") != 0 || len(increases(h.provider)) != 0 {
		t.Error("consolidation acted with no group consolidating")
	}
	if st := h.a.registry.GetStatus(t0).Consolidation; st == nil || st.Status != "Idle" || st.Command != "" {
		t.Errorf("status section %+v, want Idle with no command", st)
	}
}

// A plan that found no command is not made again while nothing changes,
// for one stabilization window: a change the simulation can tell (here a
// node's label), or the window's end, plans again. A steady cluster of
// 5,000 candidate nodes paid a whole plan every loop (issue 44).
func TestConsolidationPlansAgainOnlyOnChangeOrAfterTheWindow(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "small", min: 0, max: 5, nodes: 1, milliCPU: 2000, mem: 2 * test.GiB})
	p.SetPricing(&test.PricingModel{PerCoreHour: 1})
	o := config.Defaults().NodeGroupDefaults
	o.Consolidate = true
	p.Group("small").SetOptions(&o)
	opts := testOptions()
	opts.Consolidation.Enabled = true
	opts.Consolidation.StabilizationWindow = time.Minute
	// Its pod fits no other node, and no size is cheaper: a candidate no
	// command removes, whose delete each plan simulates.
	h := newHarness(t, opts, p, join(nodes, []runtime.Object{test.BuildScheduledPod("full", 2000, test.GiB/2, "full-rs", "small-n0")})...)
	value := scrape(t)
	plans := func() float64 { return value("consolidation_planner_simulated_removals_total", nil) }
	last := plans()
	step := func(at time.Duration, wantPlan bool, why string) {
		t.Helper()
		h.runOnce(t0.Add(at))
		got := plans()
		if planned := got > last; planned != wantPlan {
			t.Errorf("at %s (%s): planned %t, want %t", at, why, planned, wantPlan)
		}
		last = got
	}
	step(0, true, "first loop")
	step(10*time.Second, false, "nothing changed")
	step(20*time.Second, false, "nothing changed")
	n := h.node("small-n0").DeepCopy()
	n.Labels["team"] = "payments"
	h.updateNode(n)
	step(30*time.Second, true, "a label changed")
	step(40*time.Second, false, "nothing changed since")
	step(30*time.Second+time.Minute, true, "a stabilization window since the last plan")
	if countEvents(h.events(), "Consolidation") != 0 || len(increases(h.provider)) != 0 {
		t.Errorf("consolidation acted: %v", h.events())
	}
	if st := h.a.registry.GetStatus(t0).Consolidation; st == nil || st.Status != "Idle" {
		t.Errorf("status section %+v, want Idle", st)
	}
}
