package report

import (
	"errors"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
)

func pendingPod(name string) *apiv1.Pod {
	p := test.BuildPendingPod(name, 1000, test.GiB, "rs")
	p.UID = types.UID(name)
	return p
}

func emptyPlan() *scaleup.Plan {
	return &scaleup.Plan{Increases: map[string][]scaleup.Increase{}, CappedByMaxNodes: map[string]bool{}}
}

// A refused increase is counted, backs its group off with its health
// series set at once, and is told on the status ConfigMap; the next
// group's increase is recorded as a scale-up and the pods are told which
// increases are for them.
func TestScaleUpRefusedThenGrown(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 10, "g2": 10})
	failedBefore, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": metrics.FailedScaleUpCloudProviderError})
	nodesBefore, _ := f.value(t, "failed_node_creations_total", map[string]string{"reason": metrics.FailedScaleUpCloudProviderError})
	pod := pendingPod("p1")
	out := &scaleup.Outcome{Now: t0, Attempts: []scaleup.Attempt{
		{Pods: []*apiv1.Pod{pod}, Calls: []scaleup.Call{
			{Increase: scaleup.Increase{GroupID: "g1", From: 0, To: 2, Max: 10}, Group: f.p.Group("g1"), Err: errors.New("422 pool is being updated")}}},
		{Pods: []*apiv1.Pod{pod}, Calls: []scaleup.Call{
			{Increase: scaleup.Increase{GroupID: "g2", From: 0, To: 1, Max: 10}, Group: f.p.Group("g2")}}},
	}}
	f.r.ScaleUp(emptyPlan(), out)

	wantEvents(t, f.drain(),
		"Warning FailedToScaleUpGroup Scale-up failed for group g1: 422 pool is being updated",
		"Normal ScaledUpGroup Scale-up: setting group g2 size to 1 instead of 0 (max: 10)",
		"Normal TriggeredScaleUp pod triggered scale-up: [{g2 0->1 (max: 10)}]")
	if off, info, _ := f.registry.BackedOff("g1", t0); !off || info.ErrorCode != "cloudProviderError" {
		t.Errorf("g1 backed off %v (%+v), want backed off for cloudProviderError", off, info)
	}
	if off, _, _ := f.registry.BackedOff("g2", t0); off {
		t.Error("g2 backed off, want not: its increase was accepted")
	}
	if v, _ := f.value(t, "node_group_backoff_status", map[string]string{"node_group": "g1", "reason": "cloudProviderError"}); v != 1 {
		t.Errorf("node_group_backoff_status{g1} = %v, want 1 without waiting for the next state report", v)
	}
	if v, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": metrics.FailedScaleUpCloudProviderError}); v != failedBefore+1 {
		t.Errorf("failed_scale_ups_total rose by %v, want 1", v-failedBefore)
	}
	if v, _ := f.value(t, "failed_node_creations_total", map[string]string{"reason": metrics.FailedScaleUpCloudProviderError}); v != nodesBefore+2 {
		t.Errorf("failed_node_creations_total rose by %v, want 2", v-nodesBefore)
	}
}

// plannedGroup is a not-yet-existing group of the test provider.
func plannedGroup(t *testing.T, f *fixture) cloudprovider.NodeGroup {
	t.Helper()
	f.p.AddMachineType("s-4vcpu-8gb", test.BuildTemplate("s-4vcpu-8gb", 4000, 8*test.GiB, nil))
	g, err := f.p.NewNodeGroup("s-4vcpu-8gb", nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A creation refused at the account's droplet limit backs every group
// off, counts the failure under the limit's code and tells both the
// scale-up's and the creation's failure, in the cloud's words.
func TestCreationRefusedAtAccountLimit(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 10})
	planned := plannedGroup(t, f)
	before, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": "dropletLimit"})
	limit := &cloudprovider.AccountLimitError{Code: "dropletLimit", Message: "creating this droplet will exceed your droplet limit",
		Err: errors.New("POST /v2/kubernetes/clusters/c/node_pools: 422")}
	f.r.ScaleUp(emptyPlan(), &scaleup.Outcome{Now: t0, Attempts: []scaleup.Attempt{{Pods: []*apiv1.Pod{pendingPod("p1")}, Calls: []scaleup.Call{{
		Increase: scaleup.Increase{GroupID: planned.Id(), To: 3}, Group: planned, Planned: planned, Err: limit,
		CreationPausedUntil: t0.Add(5 * time.Minute)}}}}})

	wantEvents(t, f.drain(),
		"Warning FailedToScaleUpGroup Scale-up failed for group s-4vcpu-8gb: the cloud refused it at an account-wide limit (dropletLimit): \"creating this droplet will exceed your droplet limit\"; scale-up of every node group backed off until",
		"Warning FailedToCreateNodeGroup Creating node group s-4vcpu-8gb failed at an account-wide limit (dropletLimit): \"creating this droplet will exceed your droplet limit\"; node pool creation backed off until 2026-01-02T03:05:00Z")
	if off, _, _ := f.registry.BackedOff("g1", t0); !off {
		t.Error("g1 not backed off: an account-wide limit backs off every group")
	}
	if v, _ := f.value(t, "node_group_backoff_status", map[string]string{"node_group": "g1", "reason": "dropletLimit"}); v != 1 {
		t.Errorf("node_group_backoff_status{g1,dropletLimit} = %v, want 1", v)
	}
	if v, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": "dropletLimit"}); v != before+1 {
		t.Errorf("failed_scale_ups_total{dropletLimit} rose by %v, want 1", v-before)
	}
}

// A refused creation (not at a limit) says when creation is tried again,
// with no FailedToScaleUpGroup: no existing group failed.
func TestCreationRefused(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 10})
	planned := plannedGroup(t, f)
	f.r.ScaleUp(emptyPlan(), &scaleup.Outcome{Now: t0, Attempts: []scaleup.Attempt{{Pods: []*apiv1.Pod{pendingPod("p1")}, Calls: []scaleup.Call{{
		Increase: scaleup.Increase{GroupID: planned.Id(), To: 2}, Group: planned, Planned: planned, Err: errors.New("403 scope"),
		CreationPausedUntil: t0.Add(5 * time.Minute)}}}}})
	wantEvents(t, f.drain(),
		"Warning FailedToCreateNodeGroup Creating node group s-4vcpu-8gb failed (node pool creation backed off until 2026-01-02T03:05:00Z): 403 scope")
	if off, _, _ := f.registry.BackedOff("g1", t0); off {
		t.Error("g1 backed off by a refused creation of another group")
	}
}

// An accepted creation is a scale-up of the group made, a created node
// group, and a TriggeredScaleUp for the pods it is for.
func TestCreationAccepted(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 10})
	planned := plannedGroup(t, f)
	made := f.p.AddNodeGroup("pool-1", 0, 10, 2, test.BuildTemplate("pool-1", 4000, 8*test.GiB, nil))
	before, _ := f.value(t, "created_node_groups_total", nil)
	f.r.ScaleUp(emptyPlan(), &scaleup.Outcome{Now: t0, Attempts: []scaleup.Attempt{{Pods: []*apiv1.Pod{pendingPod("p1")}, Calls: []scaleup.Call{{
		Increase: scaleup.Increase{GroupID: "pool-1", To: 2, Max: 10}, Group: made, Planned: planned}}}}})
	wantEvents(t, f.drain(),
		"Normal ScaledUpGroup Scale-up: setting group pool-1 size to 2 instead of 0 (max: 10)",
		"Normal CreatedNodeGroup Created node group pool-1 (s-4vcpu-8gb) with 2 node(s) for 1 pending pod(s)",
		"Normal TriggeredScaleUp pod triggered scale-up: [{pool-1 0->2 (max: 10)}]")
	if v, _ := f.value(t, "created_node_groups_total", nil); v != before+1 {
		t.Errorf("created_node_groups_total rose by %v, want 1", v-before)
	}
}

// A pod no option helps is told why once per NotTriggerScaleUpInterval;
// a scale-up --max-nodes-total stopped says so on the status ConfigMap,
// and the limit is counted as a skipped scale-up.
func TestNotTriggeredOncePerInterval(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 5})
	skippedBefore, _ := f.value(t, "skipped_scale_events_count", map[string]string{"reason": metrics.SkippedMaxNodesTotalReached})
	plan := emptyPlan()
	plan.NotHelped = []scaleup.NotHelped{{Pods: []*apiv1.Pod{pendingPod("p1")}, Reasons: map[scaleup.Reason]int{scaleup.ReasonMaxNodesTotal: 1}}}
	plan.CappedByMaxNodes["g1"] = true
	plan.LimitsHit = []resourcequotas.Resource{resourcequotas.Nodes}
	for _, c := range []struct {
		at   time.Duration
		want []string
	}{
		{0, []string{"Normal NotTriggerScaleUp pod didn't trigger scale-up: 1 max total nodes in cluster reached"}},
		{time.Minute, nil},
		{NotTriggerScaleUpInterval, []string{"Normal NotTriggerScaleUp pod didn't trigger scale-up: 1 max total nodes in cluster reached"}},
	} {
		f.r.ScaleUp(plan, &scaleup.Outcome{Now: t0.Add(c.at), MaxNodesTotal: 5})
		wantEvents(t, f.drain(), append(c.want, "Warning MaxNodesTotalReached Max total nodes in cluster reached: 5")...)
	}
	if v, _ := f.value(t, "skipped_scale_events_count", map[string]string{"reason": metrics.SkippedMaxNodesTotalReached}); v != skippedBefore+3 {
		t.Errorf("skipped_scale_events_count{max nodes} rose by %v, want 3", v-skippedBefore)
	}
}

// Raising groups to their min size records each call as a scale-up's.
func TestScaleUpToMinSizeRecordsCalls(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 10})
	f.r.ScaleUpToMinSize([]scaleup.MinSizeSkip{{GroupID: "g2", MinSize: 2, Reason: scaleup.ReasonBackoff}},
		[]scaleup.Call{{Increase: scaleup.Increase{GroupID: "g1", From: 0, To: 2, Max: 10}, Group: f.p.Group("g1"), Err: errors.New("500")}}, t0)
	wantEvents(t, f.drain(), "Warning FailedToScaleUpGroup Scale-up failed for group g1: 500")
	if off, _, _ := f.registry.BackedOff("g1", t0); !off {
		t.Error("g1 not backed off after its refused raise to min size")
	}
}
