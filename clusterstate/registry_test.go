package clusterstate

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func opts() config.AutoscalingOptions { return config.Defaults() }

// cluster returns group g1 (min 1, max 10) with `ready` ready nodes.
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
	if r.GetStatus(t0.Add(time.Minute)).ClusterWide.ScaleUp.Status != api.ClusterScaleUpInProgress {
		t.Fatal("scale-up not in progress")
	}
	// Nodes register but are not ready yet: still upcoming for the
	// snapshot, no longer unregistered.
	newNodes := test.BuildRegisteredNodes(g, t0.Add(2*time.Minute), false)
	all := append(append([]*apiv1.Node(nil), nodes...), newNodes...)
	mustUpdate(t, r, all, t0.Add(3*time.Minute))
	gs, _ = r.NodeGroup("g1")
	if gs.Upcoming != 2 || gs.UpcomingUnregistered != 0 || gs.Readiness.NotStarted != 2 {
		t.Fatalf("registered, not ready: %+v", gs)
	}
	if r.GetStatus(t0.Add(3*time.Minute)).ClusterWide.ScaleUp.Status == api.ClusterScaleUpInProgress {
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
