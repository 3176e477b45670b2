package clusterstate

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func opts() config.AutoscalingOptions { return config.Defaults() }

// cluster: group g1 (min 1, max 10) with `ready` ready nodes.
func cluster(t *testing.T, ready int) (*test.Provider, *test.NodeGroup, []*apiv1.Node) {
	t.Helper()
	p := test.NewProvider()
	g := p.AddNodeGroup("g1", 1, 10, ready, test.BuildTemplate("g1", 2000, 4*test.GiB, nil))
	var nodes []*apiv1.Node
	for i := 0; i < ready; i++ {
		n := test.BuildNode("g1-n"+string(rune('a'+i)), 2000, 4*test.GiB)
		p.AddNode("g1", n)
		nodes = append(nodes, n)
	}
	return p, g, nodes
}

// registerNew builds Nodes for the group's creating instances.
func registerNew(g *test.NodeGroup, created time.Time, ready bool) []*apiv1.Node {
	var out []*apiv1.Node
	ins, _ := g.Nodes()
	for _, in := range ins {
		if in.Status != nil && in.Status.State == cloudprovider.InstanceCreating {
			n := test.BuildNode(in.Id[len("test://"):], 2000, 4*test.GiB)
			n.Spec.ProviderID = in.Id
			n.CreationTimestamp = metav1.NewTime(created)
			test.SetNodeReady(n, ready, created)
			out = append(out, n)
		}
	}
	return out
}

func mustUpdate(t *testing.T, r *Registry, nodes []*apiv1.Node, now time.Time) {
	t.Helper()
	if err := r.UpdateNodes(nodes, now); err != nil {
		t.Fatal(err)
	}
}

func TestUpcomingAndRequestCompletion(t *testing.T) {
	p, g, nodes := cluster(t, 1)
	r := NewRegistry(p, opts())
	mustUpdate(t, r, nodes, t0)
	if gs, _ := r.NodeGroup("g1"); gs.Upcoming != 0 || gs.Readiness.Ready != 1 {
		t.Fatalf("state = %+v", gs)
	}
	// Back the group off, then scale it up successfully: success clears it.
	r.RegisterFailedScaleUp(g, "cloudProviderError", BackoffInfo{ErrorCode: "x"}, t0.Add(-time.Hour))
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	r.RegisterScaleUp(g, 2, t0)
	mustUpdate(t, r, nodes, t0.Add(time.Minute))
	gs, _ := r.NodeGroup("g1")
	if gs.Upcoming != 2 || gs.UpcomingUnregistered != 2 || gs.Readiness.Unregistered != 2 {
		t.Fatalf("after scale-up: %+v", gs)
	}
	if !r.ScaleUpInProgress() {
		t.Fatal("scale-up not in progress")
	}
	// Nodes register but are not ready yet: still upcoming for the
	// snapshot, no longer unregistered.
	newNodes := registerNew(g, t0.Add(2*time.Minute), false)
	all := append(append([]*apiv1.Node(nil), nodes...), newNodes...)
	mustUpdate(t, r, all, t0.Add(3*time.Minute))
	gs, _ = r.NodeGroup("g1")
	if gs.Upcoming != 2 || gs.UpcomingUnregistered != 0 || gs.Readiness.NotStarted != 2 {
		t.Fatalf("registered, not ready: %+v", gs)
	}
	if r.ScaleUpInProgress() {
		t.Fatal("request not completed once nodes registered")
	}
	for _, n := range newNodes {
		test.SetNodeReady(n, true, t0.Add(4*time.Minute))
	}
	mustUpdate(t, r, all, t0.Add(5*time.Minute))
	gs, _ = r.NodeGroup("g1")
	if gs.Upcoming != 0 || gs.Readiness.Ready != 3 {
		t.Fatalf("ready: %+v", gs)
	}
}

func TestProvisionTimeoutGivesUpAndBacksOff(t *testing.T) {
	p, g, nodes := cluster(t, 1)
	o := opts()
	r := NewRegistry(p, o)
	mustUpdate(t, r, nodes, t0)
	_ = g.IncreaseSize(3)
	r.RegisterScaleUp(g, 3, t0)
	// One node arrives, two never do.
	ins, _ := g.Nodes()
	arrived := test.BuildNode("arrived", 2000, 4*test.GiB)
	arrived.Spec.ProviderID = ins[1].Id
	all := append(append([]*apiv1.Node(nil), nodes...), arrived)

	mustUpdate(t, r, all, t0.Add(14*time.Minute))
	if gu, err := r.FixNodeGroupSizes(t0.Add(14 * time.Minute)); err != nil || len(gu) != 0 {
		t.Fatalf("gave up before the deadline: %+v %v", gu, err)
	}
	now := t0.Add(16 * time.Minute)
	mustUpdate(t, r, all, now)
	p.ResetCalls()
	gu, err := r.FixNodeGroupSizes(now)
	if err != nil || len(gu) != 1 || gu[0].Decreased != 2 || !gu[0].BackedOff || len(gu[0].Instances) != 2 {
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
	mustUpdate(t, r, all, now)
	if gs, _ := r.NodeGroup("g1"); gs.Upcoming != 0 || r.ScaleUpInProgress() {
		t.Fatalf("after give-up: %+v inProgress=%v", gs, r.ScaleUpInProgress())
	}
	if gu, _ := r.FixNodeGroupSizes(now); len(gu) != 0 {
		t.Fatalf("gave up twice: %+v", gu)
	}
}

// The registry first sees the new instances a loop after the scale-up, so
// they pass --max-node-provision-time a little after the request does; when
// no loop falls in between, they are given up all the same, and the group
// is backed off.
func TestProvisionTimeoutBacksOffWhenInstancesTimeOutLast(t *testing.T) {
	p, g, nodes := cluster(t, 1)
	r := NewRegistry(p, opts())
	mustUpdate(t, r, nodes, t0)
	_ = g.IncreaseSize(2)
	r.RegisterScaleUp(g, 2, t0)
	mustUpdate(t, r, nodes, t0.Add(time.Second))
	// The next loop comes after both deadlines.
	now := t0.Add(15*time.Minute + 5*time.Second)
	mustUpdate(t, r, nodes, now)
	if _, err := r.FixNodeGroupSizes(now); err != nil {
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
	p, g, nodes := cluster(t, 1)
	r := NewRegistry(p, opts())
	_ = g.IncreaseSize(2)
	r.RegisterScaleUp(g, 2, t0)
	g.InjectError("DeleteNodes", errTest("placeholder nodes not supported"))
	now := t0.Add(20 * time.Minute)
	mustUpdate(t, r, nodes, now)
	gu, err := r.FixNodeGroupSizes(now)
	if err != nil || len(gu) != 1 || gu[0].Decreased != 2 {
		t.Fatalf("give-up = %+v, %v", gu, err)
	}
	if c := p.CallsOf("DecreaseTargetSize"); len(c) != 1 || c[0].Delta != -2 {
		t.Fatalf("DecreaseTargetSize calls = %+v", c)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func TestErrorInstancesBackOffAtOnce(t *testing.T) {
	p, g, nodes := cluster(t, 1)
	r := NewRegistry(p, opts())
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
	gu, err := r.FixNodeGroupSizes(now)
	if err != nil || len(gu) != 1 || gu[0].Decreased != 1 || gu[0].Reason != "cloudProviderError" {
		t.Fatalf("give-up = %+v %v", gu, err)
	}
	if off, info, _ := r.BackedOff("g1", now); !off || info.ErrorCode != "quota" {
		t.Fatalf("not backed off: %v %+v", off, info)
	}
	// The other node is still expected.
	reqs := r.ScaleUpRequests()
	if reqs["g1"].Increase != 1 {
		t.Fatalf("request = %+v", reqs)
	}
	// When it arrives the request completes but the backoff stays.
	all := append(nodes, registerNew(g, now, true)...)
	mustUpdate(t, r, all, now.Add(time.Minute))
	if r.ScaleUpInProgress() {
		t.Fatal("request still in progress")
	}
	if off, _, _ := r.BackedOff("g1", now.Add(time.Minute)); !off {
		t.Fatal("partial failure's backoff was cleared")
	}
}

func TestBackoffExponentialAndReset(t *testing.T) {
	b := NewBackoff(5*time.Minute, 30*time.Minute, 3*time.Hour)
	now := t0
	want := []time.Duration{5, 10, 20, 30, 30}
	for i, w := range want {
		until := b.Backoff("g", BackoffInfo{}, now)
		if until.Sub(now) != w*time.Minute {
			t.Fatalf("failure %d: backoff %s, want %dm", i, until.Sub(now), w)
		}
		if off, _, _ := b.BackedOff("g", until.Add(-time.Second)); !off {
			t.Fatalf("failure %d: not backed off before the end", i)
		}
		if off, _, _ := b.BackedOff("g", until); off {
			t.Fatalf("failure %d: still backed off at the end", i)
		}
		now = until
	}
	now = now.Add(3 * time.Hour)
	if until := b.Backoff("g", BackoffInfo{}, now); until.Sub(now) != 5*time.Minute {
		t.Fatalf("after reset timeout: %s, want 5m", until.Sub(now))
	}
}

func TestSizeMismatchWithoutRequest(t *testing.T) {
	p, g, nodes := cluster(t, 1)
	g.SetProvisionInstances(false)
	g.SetTargetSize(3) // e.g. set before a restart; the cloud lists no instances
	r := NewRegistry(p, opts())
	mustUpdate(t, r, nodes, t0)
	if gu, _ := r.FixNodeGroupSizes(t0); len(gu) != 0 {
		t.Fatal("gave up at first sight")
	}
	now := t0.Add(16 * time.Minute)
	mustUpdate(t, r, nodes, now)
	gu, _ := r.FixNodeGroupSizes(now)
	if len(gu) != 1 || gu[0].Decreased != 2 || gu[0].BackedOff {
		t.Fatalf("give-up = %+v", gu)
	}
}

func TestPerGroupProvisionTime(t *testing.T) {
	p, g, nodes := cluster(t, 1)
	g.SetOptions(&config.NodeGroupAutoscalingOptions{MaxNodeProvisionTime: 2 * time.Minute})
	r := NewRegistry(p, opts())
	mustUpdate(t, r, nodes, t0)
	_ = g.IncreaseSize(1)
	r.RegisterScaleUp(g, 1, t0)
	now := t0.Add(3 * time.Minute)
	mustUpdate(t, r, nodes, now)
	if gu, _ := r.FixNodeGroupSizes(now); len(gu) != 1 {
		t.Fatalf("per-group provision time ignored: %+v", gu)
	}
}

func TestClusterHealth(t *testing.T) {
	cases := []struct {
		ready, unready int
		healthy        bool
	}{
		{ready: 10, unready: 3, healthy: true}, // within ok count
		{ready: 4, unready: 4, healthy: false}, // 50% > 45%, 4 > 3
		{ready: 10, unready: 4, healthy: true}, // 28% < 45%
		{ready: 0, unready: 3, healthy: true},  // ok count
	}
	for _, tc := range cases {
		p, _, nodes := cluster(t, tc.ready+tc.unready)
		for i := 0; i < tc.unready; i++ {
			test.SetNodeReady(nodes[i], false, t0.Add(-time.Hour))
		}
		r := NewRegistry(p, opts())
		mustUpdate(t, r, nodes, t0)
		if r.IsClusterHealthy() != tc.healthy {
			t.Errorf("ready=%d unready=%d: healthy=%v, want %v", tc.ready, tc.unready, r.IsClusterHealthy(), tc.healthy)
		}
	}
}

func TestStatusShape(t *testing.T) {
	p, g, nodes := cluster(t, 2)
	r := NewRegistry(p, opts())
	mustUpdate(t, r, nodes, t0)
	r.RegisterFailedScaleUp(g, "cloudProviderError", BackoffInfo{ErrorCode: "no-code-digitalocean", ErrorMessage: "boom"}, t0)
	r.SetScaleDownCandidates(map[string]int{"g1": 1})
	st := r.GetStatus(t0)
	if st.AutoscalerStatus != api.ClusterAutoscalerRunning || st.ClusterWide.Health.Status != api.ClusterHealthy ||
		st.ClusterWide.Health.NodeCounts.Registered.Ready != 2 || len(st.NodeGroups) != 1 {
		t.Fatalf("status = %+v", st)
	}
	ng := st.NodeGroups[0]
	if ng.Name != "g1" || ng.Health.CloudProviderTarget != 2 || ng.Health.MinSize != 1 || ng.Health.MaxSize != 10 ||
		ng.ScaleUp.Status != api.NodeGroupScaleUpBackoff || ng.ScaleUp.BackoffInfo.ErrorMessage != "boom" ||
		ng.ScaleDown.Status != api.ScaleDownCandidatesPresent || ng.ScaleDown.Candidates != 1 {
		t.Fatalf("group status = %+v", ng)
	}
	if st.ClusterWide.ScaleDown.Candidates != 1 {
		t.Fatalf("cluster scale-down = %+v", st.ClusterWide.ScaleDown)
	}
	// Transition times move only when a status changes.
	later := t0.Add(time.Minute)
	st2 := r.GetStatus(later)
	if !st2.ClusterWide.Health.LastTransitionTime.Time.Equal(t0) || !st2.ClusterWide.Health.LastProbeTime.Time.Equal(later) {
		t.Fatalf("health times = %+v", st2.ClusterWide.Health)
	}
	r.SetScaleDownCandidates(nil)
	st3 := r.GetStatus(later)
	if st3.NodeGroups[0].ScaleDown.Status != api.ScaleDownNoCandidates || !st3.NodeGroups[0].ScaleDown.LastTransitionTime.Time.Equal(later) {
		t.Fatalf("scale-down transition = %+v", st3.NodeGroups[0].ScaleDown)
	}
	if _, err := yaml.Marshal(st3); err != nil {
		t.Fatal(err)
	}
}

func TestBeingDeletedNodes(t *testing.T) {
	p, g, nodes := cluster(t, 3)
	nodes[0].Spec.Taints = []apiv1.Taint{{Key: ToBeDeletedTaint, Effect: apiv1.TaintEffectNoSchedule}}
	r := NewRegistry(p, opts())
	mustUpdate(t, r, nodes, t0)
	gs, _ := r.NodeGroup("g1")
	if gs.Readiness.BeingDeleted != 1 || gs.Readiness.Ready != 2 || gs.Upcoming != 0 {
		t.Fatalf("while draining: %+v", gs)
	}
	// The cloud deleted it (target 2) but the Node object lingers: nothing upcoming.
	if err := g.DeleteNodes(nodes[:1]); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, r, nodes, t0)
	gs, _ = r.NodeGroup("g1")
	if gs.Upcoming != 0 || gs.Target != 2 {
		t.Fatalf("after delete: %+v", gs)
	}
}
