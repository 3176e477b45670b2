package shadow

import (
	"errors"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	cptest "github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// writeMethods are the test provider's recorded calls that change the cloud.
var writeMethods = []string{"IncreaseSize", "AtomicIncreaseSize", "DecreaseTargetSize", "DeleteNodes", "ForceDeleteNodes", "Delete", "Create"}

func noWrites(t *testing.T, real *cptest.Provider) {
	t.Helper()
	for _, m := range writeMethods {
		if calls := real.CallsOf(m); len(calls) > 0 {
			t.Errorf("the real provider got %d %s call(s): %+v", len(calls), m, calls)
		}
	}
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// world is a real test provider with group "g" (min 1, max 5, target 2,
// two running nodes n1, n2) wrapped in shadow.
func world(t *testing.T) (*cptest.Provider, *Provider, *clock, *[]Write, []*apiv1.Node) {
	t.Helper()
	real := cptest.NewProvider()
	real.AddNodeGroup("g", 1, 5, 2, cptest.BuildTemplate("g", 1000, 1<<30, nil))
	nodes := []*apiv1.Node{cptest.BuildNode("n1", 1000, 1<<30), cptest.BuildNode("n2", 1000, 1<<30)}
	for _, n := range nodes {
		real.AddNode("g", n)
	}
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var writes []Write
	p := New(real, Options{Hold: 5 * time.Minute, Now: clk.Now, OnWrite: func(w Write) { writes = append(writes, w) },
		Defaults: config.NodeGroupAutoscalingOptions{MaxNodeProvisionTime: 4 * time.Minute}})
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	return real, p, clk, &writes, nodes
}

func target(t *testing.T, g cloudprovider.NodeGroup) int {
	t.Helper()
	n, err := g.TargetSize()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func only(t *testing.T, p *Provider) cloudprovider.NodeGroup {
	t.Helper()
	gs := p.NodeGroups()
	if len(gs) != 1 {
		t.Fatalf("%d node groups, want 1", len(gs))
	}
	return gs[0]
}

func TestIncreaseSizeIsRecordedNotSentAndShownForHalfTheProvisionTime(t *testing.T) {
	real, p, clk, writes, _ := world(t)
	g := only(t, p)
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	if err := g.AtomicIncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	noWrites(t, real)
	if got := real.Group("g"); target(t, got) != 2 {
		t.Fatalf("real target changed to %d", target(t, got))
	}
	if len(*writes) != 2 || (*writes)[0].Op != OpIncreaseSize || (*writes)[0].Delta != 2 {
		t.Fatalf("writes %+v", *writes)
	}
	// The core sees the would-be target, across refreshes, for the hold.
	start := clk.now
	for _, at := range []time.Duration{0, time.Minute, 119 * time.Second} {
		clk.now = start.Add(at)
		if err := p.Refresh(); err != nil {
			t.Fatal(err)
		}
		if got := target(t, only(t, p)); got != 5 {
			t.Fatalf("after %v: target %d, want the would-be 5", at, got)
		}
	}
	// Over max: refused as the provider refuses it.
	if err := only(t, p).IncreaseSize(1); err == nil {
		t.Fatal("an increase over max was accepted")
	}
	if err := only(t, p).IncreaseSize(0); err == nil {
		t.Fatal("a zero increase was accepted")
	}
	// Half of the 4 minutes of provision time: the core never times the
	// would-be nodes out.
	clk.now = clk.now.Add(2 * time.Second)
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got := target(t, only(t, p)); got != 2 {
		t.Fatalf("after the hold: target %d, want the real 2", got)
	}
	noWrites(t, real)
}

func TestWouldBeTargetDroppedWhenTheRealTargetMoves(t *testing.T) {
	real, p, _, _, _ := world(t)
	if err := only(t, p).IncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	real.Group("g").SetTargetSize(4) // someone else resized the pool
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got := target(t, only(t, p)); got != 4 {
		t.Fatalf("target %d, want the real 4", got)
	}
}

func TestDecreaseTargetSizeChecksMin(t *testing.T) {
	real, p, _, writes, _ := world(t)
	g := only(t, p)
	if err := g.DecreaseTargetSize(-2); err == nil {
		t.Fatal("a decrease below min was accepted")
	}
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	if err := g.DecreaseTargetSize(-1); err != nil {
		t.Fatal(err)
	}
	if got := target(t, g); got != 3 {
		t.Fatalf("target %d, want 3", got)
	}
	if len(*writes) != 2 || (*writes)[1].Op != OpDecreaseTargetSize {
		t.Fatalf("writes %+v", *writes)
	}
	noWrites(t, real)
}

func TestDeleteNodesHidesTheNodeUntilTheHoldEnds(t *testing.T) {
	real, p, clk, writes, nodes := world(t)
	g, err := p.NodeGroupForNode(nodes[0])
	if err != nil || g == nil {
		t.Fatalf("group of n1: %v, %v", g, err)
	}
	if err := g.DeleteNodes([]*apiv1.Node{nodes[0]}); err != nil {
		t.Fatal(err)
	}
	noWrites(t, real)
	if len(*writes) != 1 || (*writes)[0].Op != OpDeleteNodes || (*writes)[0].Nodes[0] != "n1" {
		t.Fatalf("writes %+v", *writes)
	}
	check := func(hidden bool) {
		t.Helper()
		g, err := p.NodeGroupForNode(nodes[0])
		if err != nil {
			t.Fatal(err)
		}
		if (g == nil) != hidden {
			t.Fatalf("NodeGroupForNode(n1) = %v, want hidden %v", g, hidden)
		}
		ins, err := only(t, p).Nodes()
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]int{true: 1, false: 2}[hidden]
		if len(ins) != want || target(t, only(t, p)) != want {
			t.Fatalf("%d instances, target %d; want %d", len(ins), target(t, only(t, p)), want)
		}
	}
	check(true)
	// Min 1: the other node may not go too.
	if err := only(t, p).DeleteNodes([]*apiv1.Node{nodes[1]}); err == nil {
		t.Fatal("a deletion below min was accepted")
	}
	clk.now = clk.now.Add(4 * time.Minute)
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	check(true)
	clk.now = clk.now.Add(time.Minute)
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	check(false)
	noWrites(t, real)
}

func TestDeleteNodesRefusesANodeOfAnotherGroup(t *testing.T) {
	real, p, _, _, _ := world(t)
	stranger := cptest.BuildNode("x", 1000, 1<<30)
	stranger.Spec.ProviderID = "test://x"
	if err := only(t, p).DeleteNodes([]*apiv1.Node{stranger}); err == nil {
		t.Fatal("a node of no group was accepted")
	}
	noWrites(t, real)
}

func TestCreatedGroupIsListedForTheHold(t *testing.T) {
	real, p, clk, writes, _ := world(t)
	real.AddMachineType("big", cptest.BuildTemplate("big", 4000, 8<<30, nil))
	planned, err := p.NewNodeGroup("big", nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if planned.Exist() {
		t.Fatal("a planned group exists")
	}
	sc, ok := planned.(cloudprovider.SizedCreator)
	if !ok {
		t.Fatal("the wrapped group is no SizedCreator")
	}
	made, err := sc.CreateWithSize(2)
	if err != nil {
		t.Fatal(err)
	}
	if !made.Exist() || target(t, made) != 2 {
		t.Fatalf("created group: exist %v, target %d", made.Exist(), target(t, made))
	}
	if len(p.NodeGroups()) != 2 {
		t.Fatalf("%d groups listed, want the real one and the created one", len(p.NodeGroups()))
	}
	if len(*writes) != 1 || (*writes)[0].Op != OpCreateNodeGroup || (*writes)[0].Delta != 2 {
		t.Fatalf("writes %+v", *writes)
	}
	clk.now = clk.now.Add(2*time.Minute + time.Second)
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	if len(p.NodeGroups()) != 1 {
		t.Fatalf("%d groups listed after the hold, want 1", len(p.NodeGroups()))
	}
	noWrites(t, real)
}

func TestDeletedGroupIsLeftOutForTheHold(t *testing.T) {
	real, p, clk, writes, _ := world(t)
	if err := only(t, p).Delete(); err != nil {
		t.Fatal(err)
	}
	if n := len(p.NodeGroups()); n != 0 {
		t.Fatalf("%d groups listed after a would-be delete", n)
	}
	if len(*writes) != 1 || (*writes)[0].Op != OpDeleteNodeGroup {
		t.Fatalf("writes %+v", *writes)
	}
	clk.now = clk.now.Add(5 * time.Minute)
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	if n := len(p.NodeGroups()); n != 1 {
		t.Fatalf("%d groups listed after the hold, want 1", n)
	}
	noWrites(t, real)
}

func TestReadsAndOptionalInterfacesGoToTheRealProvider(t *testing.T) {
	real, p, _, _, nodes := world(t)
	real.SetProblems("token lacks a scope")
	if got := p.Problems(); len(got) != 1 || got[0] != "token lacks a scope" {
		t.Fatalf("problems %v", got)
	}
	if p.Name() != real.Name() || p.GPULabel() != real.GPULabel() {
		t.Fatal("names differ")
	}
	if has, err := p.HasInstance(nodes[0]); err != nil || !has {
		t.Fatalf("HasInstance: %v, %v", has, err)
	}
	real.Group("g").SetMaxHourlyCost(1.5)
	if l, ok := only(t, p).(cloudprovider.HourlyCostLimiter); !ok || l.MaxHourlyCost() != 1.5 {
		t.Fatal("the group's hourly cost limit is not passed on")
	}
	if _, known := p.InstanceQuota(); known {
		t.Fatal("an instance quota reported though the real provider reads none")
	}
	real.InjectError("Refresh", errors.New("boom"))
	if err := p.Refresh(); err == nil {
		t.Fatal("a failed real refresh was hidden")
	}
	if len(real.CallsOf("Refresh")) == 0 {
		t.Fatal("Refresh not passed on")
	}
	noWrites(t, real)
}

// When the cloud itself removes a node removed in shadow (someone else deleted
// it), the real listing takes over at the next refresh: the target is not
// counted down twice.
func TestRemovalInShadowGivesWayToTheRealListing(t *testing.T) {
	real, p, _, _, nodes := world(t)
	real.Group("g").SetTargetSize(3) // room for one real deletion above min
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	if err := only(t, p).DeleteNodes([]*apiv1.Node{nodes[0]}); err != nil {
		t.Fatal(err)
	}
	if got := target(t, only(t, p)); got != 2 {
		t.Fatalf("target %d after the removal in shadow, want 2", got)
	}
	if err := real.Group("g").DeleteNodes([]*apiv1.Node{nodes[0]}); err != nil { // the real deletion
		t.Fatal(err)
	}
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got := target(t, only(t, p)); got != 2 {
		t.Fatalf("target %d once the cloud deleted the node, want the real 2", got)
	}
	ins, _ := only(t, p).Nodes()
	if len(ins) != 1 {
		t.Fatalf("%d instances, want 1", len(ins))
	}
}
