package scaleup

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// The pause of node pool creation is the planner's input: while it lasts
// no new group is planned and the pods are told why; once over, the new
// group is planned again.
func TestPlannerTakesTheCreationPauseAsInput(t *testing.T) {
	o, in := newGroupScaleUp(t, test.NewProvider(), []machine{{name: "cpu", milliCPU: 4000, price: 0.5}},
		[]*apiv1.Pod{test.BuildPendingPod("p", 1000, test.GiB, "rs")})
	paused := o.planner.computePlan(planInput{Input: in, CreationPausedUntil: in.Now.Add(time.Minute)})
	if len(paused.Options) != 0 || len(paused.NotHelped) != 1 || paused.NotHelped[0].Reasons[ReasonAutoprovisionBackoff] != 1 {
		t.Fatalf("while paused: options %d, not helped %v: want none, and the pod told creation is backed off", len(paused.Options), paused.NotHelped)
	}
	over := o.planner.computePlan(planInput{Input: in, CreationPausedUntil: in.Now})
	if len(over.Options) != 1 {
		t.Fatalf("after the pause: options %d, want the new group", len(over.Options))
	}
}

// A refused creation pauses creation: the orchestrator's next plan gets
// the executor's pause and plans no new group.
func TestRefusedCreationPausesTheNextPlan(t *testing.T) {
	o, in := newGroupScaleUp(t, test.NewProvider(), []machine{{name: "cpu", milliCPU: 4000, price: 0.5}},
		[]*apiv1.Pod{test.BuildPendingPod("p", 1000, test.GiB, "rs")})
	// The test provider's planned groups refuse Create.
	res, err := o.ScaleUp(in)
	if err != nil || res.ScaledUp() {
		t.Fatalf("scaled up %v (err %v), want the creation refused", res.ScaledUp(), err)
	}
	if rec := o.recorder.(*countingRecorder); rec.scaleUps != 1 {
		t.Errorf("outcomes recorded %d, want 1", rec.scaleUps)
	}
	plan := o.computePlan(in)
	if len(plan.Options) != 0 || len(plan.NotHelped) != 1 || plan.NotHelped[0].Reasons[ReasonAutoprovisionBackoff] != 1 {
		t.Fatalf("after a refused creation: options %d, not helped %v: want none, creation backed off", len(plan.Options), plan.NotHelped)
	}
}
