package giveup

import (
	"errors"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// t0 is after the test builders' creation timestamps, so nodes are past
// their start-up time.
var t0 = time.Unix(1_700_000_000, 0).Add(2 * time.Hour)

// giveUpCluster returns group g1 (min 1, max 10) with one ready node, and a
// registry that has seen it.
func giveUpCluster(t *testing.T) (*test.Provider, *test.NodeGroup, []*apiv1.Node, *clusterstate.Registry) {
	t.Helper()
	p := test.NewProvider()
	p.AddNodeGroup("g1", 1, 10, 1, test.BuildTemplate("g1", 2000, 4*test.GiB, nil))
	n := test.BuildNode("g1-n0", 2000, 4*test.GiB)
	p.AddNode("g1", n)
	return p, p.Group("g1"), []*apiv1.Node{n}, clusterstate.NewRegistry(p, config.Defaults())
}

func mustUpdate(t *testing.T, r *clusterstate.Registry, nodes []*apiv1.Node, now time.Time) {
	t.Helper()
	if err := r.UpdateNodes(nodes, now); err != nil {
		t.Fatal(err)
	}
}

func scaleUpInProgress(r *clusterstate.Registry, now time.Time) bool {
	return r.GetStatus(now).ClusterWide.ScaleUp.Status == api.ClusterScaleUpInProgress
}

func TestProvisionTimeoutGivesUpAndBacksOff(t *testing.T) {
	p, g, nodes, r := giveUpCluster(t)
	mustUpdate(t, r, nodes, t0)
	_ = g.IncreaseSize(3)
	r.RegisterScaleUp(g, 3, t0)
	// One node arrives, two never do.
	ins, _ := g.Nodes()
	arrived := test.BuildNode("arrived", 2000, 4*test.GiB)
	arrived.Spec.ProviderID = ins[1].Id
	all := append(append([]*apiv1.Node(nil), nodes...), arrived)

	mustUpdate(t, r, all, t0.Add(14*time.Minute))
	if gu, err := Run(r, t0.Add(14*time.Minute)); err != nil || len(gu) != 0 {
		t.Fatalf("gave up before the deadline: %+v %v", gu, err)
	}
	now := t0.Add(16 * time.Minute)
	mustUpdate(t, r, all, now)
	p.ResetCalls()
	gu, err := Run(r, now)
	if err != nil || len(gu) != 1 || gu[0].Decreased != 2 || !gu[0].Plan.BackOff || len(gu[0].Plan.Instances) != 2 {
		t.Fatalf("give-up = %+v, %v", gu, err)
	}
	if calls := p.CallsOf("DeleteNodes"); len(calls) != 1 || len(calls[0].Nodes) != 2 {
		t.Fatalf("DeleteNodes calls = %+v", calls)
	}
	if ts, _ := g.TargetSize(); ts != 2 {
		t.Fatalf("target = %d, want 2", ts)
	}
	if off, info, until := r.BackedOff("g1", now); !off || info.ErrorCode != "timeout" || until != now.Add(5*time.Minute) {
		t.Fatalf("backoff = %v %+v %v", off, info, until)
	}
	// The provider learns the size's nodes did not come (held per size).
	if n := g.NeverCame(); n != 1 {
		t.Fatalf("NodesNeverCame called %d times, want 1", n)
	}
	mustUpdate(t, r, all, now)
	if gs, _ := r.NodeGroup("g1"); gs.Upcoming != 0 || scaleUpInProgress(r, now) {
		t.Fatalf("after give-up: %+v inProgress=%v", gs, scaleUpInProgress(r, now))
	}
	if gu, _ := Run(r, now); len(gu) != 0 {
		t.Fatalf("gave up twice: %+v", gu)
	}
}

// The registry first sees the new instances a loop after the scale-up, so
// they pass --max-node-provision-time a little after the request does; when
// no loop falls in between, they are given up all the same, and the group
// is backed off.
func TestProvisionTimeoutBacksOffWhenInstancesTimeOutLast(t *testing.T) {
	_, g, nodes, r := giveUpCluster(t)
	mustUpdate(t, r, nodes, t0)
	_ = g.IncreaseSize(2)
	r.RegisterScaleUp(g, 2, t0)
	mustUpdate(t, r, nodes, t0.Add(time.Second))
	// The next loop comes after both deadlines.
	now := t0.Add(15*time.Minute + 5*time.Second)
	mustUpdate(t, r, nodes, now)
	if _, err := Run(r, now); err != nil {
		t.Fatal(err)
	}
	if ts, _ := g.TargetSize(); ts != 1 {
		t.Errorf("target = %d, want 1", ts)
	}
	if off, info, _ := r.BackedOff("g1", now); !off || info.ErrorCode != "timeout" {
		t.Errorf("backoff = %v %+v, want backed off for a timeout", off, info)
	}
}

func TestDeleteRefusedLowersTarget(t *testing.T) {
	p, g, nodes, r := giveUpCluster(t)
	_ = g.IncreaseSize(2)
	r.RegisterScaleUp(g, 2, t0)
	g.InjectError("DeleteNodes", errors.New("placeholder nodes not supported"))
	now := t0.Add(20 * time.Minute)
	mustUpdate(t, r, nodes, now)
	gu, err := Run(r, now)
	if err != nil || len(gu) != 1 || gu[0].Decreased != 2 || gu[0].DeleteErr == nil {
		t.Fatalf("give-up = %+v, %v", gu, err)
	}
	if c := p.CallsOf("DecreaseTargetSize"); len(c) != 1 || c[0].Delta != -2 {
		t.Fatalf("DecreaseTargetSize calls = %+v", c)
	}
}

// A refused deletion is asked for again after a minute, while the given-up
// instances still take room in the target; the request is not given up on
// twice.
func TestRefusedDeleteIsRetried(t *testing.T) {
	p, g, nodes, r := giveUpCluster(t)
	_ = g.IncreaseSize(2)
	r.RegisterScaleUp(g, 2, t0)
	ins, _ := g.Nodes()
	g.SetInstanceError(ins[1].Id, &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "quota", ErrorMessage: "no room"})
	g.SetInstanceError(ins[2].Id, &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "quota", ErrorMessage: "no room"})
	// The cloud refuses the deletion and keeps counting the instances.
	g.InjectError("DeleteNodes", errors.New("busy"))
	g.InjectError("DecreaseTargetSize", errors.New("busy"))
	now := t0.Add(time.Minute)
	mustUpdate(t, r, nodes, now)
	if gu, err := Run(r, now); err == nil || len(gu) != 1 || gu[0].Plan.Retry || gu[0].DeleteErr == nil {
		t.Fatalf("give-up = %+v, %v", gu, err)
	}
	mustUpdate(t, r, nodes, now.Add(30*time.Second))
	if gu, _ := Run(r, now.Add(30*time.Second)); len(gu) != 0 {
		t.Fatalf("asked again within a minute: %+v", gu)
	}
	g.InjectError("DeleteNodes", nil)
	p.ResetCalls()
	later := now.Add(time.Minute)
	mustUpdate(t, r, nodes, later)
	gu, err := Run(r, later)
	if err != nil || len(gu) != 1 || !gu[0].Plan.Retry || gu[0].Decreased != 2 {
		t.Fatalf("retry = %+v, %v", gu, err)
	}
	if calls := p.CallsOf("DeleteNodes"); len(calls) != 1 || len(calls[0].Nodes) != 2 {
		t.Fatalf("DeleteNodes calls = %+v", calls)
	}
}

func TestErrorInstancesBackOffAtOnce(t *testing.T) {
	_, g, nodes, r := giveUpCluster(t)
	_ = g.IncreaseSize(2)
	r.RegisterScaleUp(g, 2, t0)
	ins, _ := g.Nodes()
	g.SetInstanceError(ins[2].Id, &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "quota", ErrorMessage: "droplet limit reached"})
	now := t0.Add(time.Minute)
	mustUpdate(t, r, nodes, now)
	gs, _ := r.NodeGroup("g1")
	if gs.Upcoming != 1 || gs.Readiness.LongUnregistered != 1 {
		t.Fatalf("state = %+v", gs)
	}
	gu, err := Run(r, now)
	if err != nil || len(gu) != 1 || gu[0].Decreased != 1 || gu[0].Plan.Reason != clusterstate.GiveUpCloudError {
		t.Fatalf("give-up = %+v %v", gu, err)
	}
	if off, info, _ := r.BackedOff("g1", now); !off || info.ErrorCode != "quota" {
		t.Fatalf("not backed off: %v %+v", off, info)
	}
	// The other node is still expected.
	mustUpdate(t, r, nodes, now)
	if gs, _ := r.NodeGroup("g1"); gs.Upcoming != 1 || !scaleUpInProgress(r, now) {
		t.Fatalf("after give-up: %+v inProgress=%v", gs, scaleUpInProgress(r, now))
	}
	// When it arrives the request completes but the backoff stays.
	all := append(nodes, test.BuildRegisteredNodes(g, now, true)...)
	mustUpdate(t, r, all, now.Add(time.Minute))
	if scaleUpInProgress(r, now.Add(time.Minute)) {
		t.Fatal("request still in progress")
	}
	if off, _, _ := r.BackedOff("g1", now.Add(time.Minute)); !off {
		t.Fatal("partial failure's backoff was cleared")
	}
}

func TestSizeMismatchWithoutRequest(t *testing.T) {
	_, g, nodes, r := giveUpCluster(t)
	g.SetProvisionInstances(false)
	g.SetTargetSize(3) // e.g. set before a restart; the cloud lists no instances
	mustUpdate(t, r, nodes, t0)
	if gu, _ := Run(r, t0); len(gu) != 0 {
		t.Fatal("gave up at first sight")
	}
	now := t0.Add(16 * time.Minute)
	mustUpdate(t, r, nodes, now)
	gu, _ := Run(r, now)
	if len(gu) != 1 || gu[0].Decreased != 2 || gu[0].Plan.BackOff {
		t.Fatalf("give-up = %+v", gu)
	}
}

func TestPerGroupProvisionTime(t *testing.T) {
	_, g, nodes, r := giveUpCluster(t)
	g.SetOptions(&config.NodeGroupAutoscalingOptions{MaxNodeProvisionTime: 2 * time.Minute})
	mustUpdate(t, r, nodes, t0)
	_ = g.IncreaseSize(1)
	r.RegisterScaleUp(g, 1, t0)
	now := t0.Add(3 * time.Minute)
	mustUpdate(t, r, nodes, now)
	if gu, _ := Run(r, now); len(gu) != 1 {
		t.Fatalf("per-group provision time ignored: %+v", gu)
	}
}
