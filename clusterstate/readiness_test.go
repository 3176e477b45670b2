package clusterstate

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// Readiness as upstream's utils/kubernetes/ready.go judges it: the Ready
// condition alone is not enough.
func TestNodeReadiness(t *testing.T) {
	cases := []struct {
		name      string
		ready     bool
		condition apiv1.NodeConditionType // set True besides Ready
		taint     string
		want      bool
	}{
		{name: "ready", ready: true, want: true},
		{name: "not ready", ready: false, want: false},
		{name: "ready with not-ready taint", ready: true, taint: apiv1.TaintNodeNotReady, want: false},
		{name: "ready with unreachable taint", ready: true, taint: apiv1.TaintNodeUnreachable, want: false},
		{name: "ready with disk-pressure taint", ready: true, taint: apiv1.TaintNodeDiskPressure, want: false},
		{name: "ready with network-unavailable taint", ready: true, taint: apiv1.TaintNodeNetworkUnavailable, want: false},
		{name: "ready with DiskPressure condition", ready: true, condition: apiv1.NodeDiskPressure, want: false},
		{name: "ready with NetworkUnavailable condition", ready: true, condition: apiv1.NodeNetworkUnavailable, want: false},
		{name: "memory pressure does not make a node unready", ready: true, condition: apiv1.NodeMemoryPressure, want: true},
		{name: "other taints do not either", ready: true, taint: "dedicated", want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := test.BuildNode("n", 1000, test.GiB)
			test.SetNodeReady(n, tc.ready, t0.Add(-time.Hour))
			if tc.condition != "" {
				n.Status.Conditions = append(n.Status.Conditions, apiv1.NodeCondition{
					Type: tc.condition, Status: apiv1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))})
			}
			if tc.taint != "" {
				added := metav1.NewTime(t0.Add(-2 * time.Minute))
				n.Spec.Taints = []apiv1.Taint{{Key: tc.taint, Effect: apiv1.TaintEffectNoSchedule, TimeAdded: &added}}
			}
			got, since := NodeReadiness(n)
			if got != tc.want {
				t.Fatalf("ready = %v, want %v", got, tc.want)
			}
			if tc.condition != "" && !tc.want && !since.Equal(t0.Add(-time.Minute)) {
				t.Errorf("since = %v, want the condition's transition", since)
			}
			if tc.taint != "" && !tc.want && !since.Equal(t0.Add(-2*time.Minute)) {
				t.Errorf("since = %v, want the taint's time", since)
			}
		})
	}
	n := test.BuildNode("n", 1000, test.GiB)
	n.Status.Conditions = nil
	if ready, _ := NodeReadiness(n); ready {
		t.Error("a node without a Ready condition is ready")
	}
}

// The node cache keeps only ReadinessConditions: a condition outside the
// set, whatever its status and transition, changes neither readiness nor
// its time; each one inside it changes one of them.
func TestReadinessConditionsAreWhatReadinessReads(t *testing.T) {
	base := test.BuildNode("n", 1000, test.GiB)
	test.SetNodeReady(base, true, t0.Add(-time.Hour))
	wantReady, wantSince := NodeReadiness(base)
	for _, typ := range []apiv1.NodeConditionType{apiv1.NodeReady, apiv1.NodeMemoryPressure, apiv1.NodeDiskPressure,
		apiv1.NodePIDPressure, apiv1.NodeNetworkUnavailable, "CustomProblem"} {
		for _, status := range []apiv1.ConditionStatus{apiv1.ConditionTrue, apiv1.ConditionFalse} {
			n := base.DeepCopy()
			c := apiv1.NodeCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}
			if typ == apiv1.NodeReady {
				n.Status.Conditions = []apiv1.NodeCondition{c}
			} else {
				n.Status.Conditions = append(n.Status.Conditions, c)
			}
			ready, since := NodeReadiness(n)
			changed := ready != wantReady || !since.Equal(wantSince)
			if changed != ReadinessConditions[typ] {
				t.Errorf("%s=%s: readiness changed %v, in ReadinessConditions %v", typ, status, changed, ReadinessConditions[typ])
			}
		}
	}
}

func gpuNode(name string, gpus int64) *apiv1.Node {
	n := test.BuildNode(name, 2000, 4*test.GiB)
	n.Labels["test.gpu/type"] = "nvidia"
	if gpus > 0 {
		n.Status.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
		n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return n
}

// A GPU node that is Ready but does not advertise its GPU yet is not
// started while young and unready (resourceUnready) after
// MaxNodeStartupTime, as upstream's GPU custom-resources processor has it.
func TestGPUNodeWithoutGPUIsNotReady(t *testing.T) {
	p := test.NewProvider()
	p.AddNodeGroup("gpu", 0, 10, 3, test.BuildTemplate("gpu", 2000, 4*test.GiB, map[string]string{"test.gpu/type": "nvidia"}))
	young := gpuNode("young", 0)
	young.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	old := gpuNode("old", 0)
	old.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	done := gpuNode("done", 1)
	for _, n := range []*apiv1.Node{young, old, done} {
		p.AddNode("gpu", n)
	}
	r := NewRegistry(p, opts())
	mustUpdate(t, r, []*apiv1.Node{young, old, done}, t0)
	gs, _ := r.NodeGroup("gpu")
	rd := gs.Readiness
	if rd.Ready != 1 || rd.NotStarted != 1 || rd.Unready != 1 || rd.ResourceUnready != 1 {
		t.Fatalf("readiness = %+v, want 1 ready, 1 not started, 1 unready (resourceUnready)", rd)
	}
	if gs.Upcoming != 1 {
		t.Fatalf("upcoming = %d, want 1 (the young node without its GPU)", gs.Upcoming)
	}
	if st := r.GetStatus(t0); st.ClusterWide.Health.NodeCounts.Registered.Unready.ResourceUnready != 1 {
		t.Fatalf("status resourceUnready = %+v", st.ClusterWide.Health.NodeCounts.Registered.Unready)
	}
}

// Whether an instance has a Node is decided by provider ID alone. While
// NodeGroupForNode fails, the group's running nodes stay registered (found
// by provider ID in the group's instances): 15 minutes of errors neither
// plan to delete them nor to lower the target.
func TestNodeGroupForNodeErrorsKeepNodesRegistered(t *testing.T) {
	p, g, nodes := cluster(t, 3)
	p.InjectError("NodeGroupForNode", errTest("provider unavailable"))
	r := NewRegistry(p, opts())
	for _, at := range []time.Duration{0, 10 * time.Minute, 16 * time.Minute, 40 * time.Minute} {
		mustUpdate(t, r, nodes, t0.Add(at))
		gs, _ := r.NodeGroup("g1")
		if gs.Readiness.Ready != 3 || gs.Readiness.Unregistered+gs.Readiness.LongUnregistered != 0 || gs.Upcoming != 0 {
			t.Fatalf("at +%s: %+v upcoming %d, want 3 ready, none unregistered or upcoming", at, gs.Readiness, gs.Upcoming)
		}
		if id := r.NodeGroupIDForNode(nodes[0].Name); id != "g1" {
			t.Fatalf("at +%s: group of %s = %q", at, nodes[0].Name, id)
		}
		if p, ok := r.PlanRetryDelete("g1", t0.Add(at)); ok {
			t.Fatalf("at +%s: retry planned %+v", at, p)
		}
		if p, ok := r.PlanGiveUp("g1", t0.Add(at)); ok {
			t.Fatalf("at +%s: give-up planned %+v", at, p)
		}
	}
	if calls := p.Calls(); len(calls) != 0 {
		t.Fatalf("provider calls = %+v, want none", calls)
	}
	if ts, _ := g.TargetSize(); ts != 3 {
		t.Fatalf("target = %d", ts)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// IsReady answers from the last update for the node objects it classified,
// and classifies any other object of the same name afresh: a node that
// gained a startup taint (or lost its GPU) since is not taken as ready.
func TestIsReadyClassifiesANewerObjectAfresh(t *testing.T) {
	p := test.NewProvider()
	p.AddNodeGroup("gpu", 0, 10, 2, test.BuildTemplate("gpu", 2000, 4*test.GiB, map[string]string{"test.gpu/type": "nvidia"}))
	done, young := gpuNode("done", 1), gpuNode("young", 0)
	young.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	p.AddNode("gpu", done)
	p.AddNode("gpu", young)
	r := NewRegistry(p, opts())
	mustUpdate(t, r, []*apiv1.Node{done, young}, t0)
	if !r.IsReady(done) || r.IsReady(young) {
		t.Fatalf("IsReady(done, young) = %v, %v, want true, false", r.IsReady(done), r.IsReady(young))
	}
	tainted := done.DeepCopy()
	tainted.Spec.Taints = append(tainted.Spec.Taints, apiv1.Taint{Key: StartupTaintPrefix + "csi", Effect: apiv1.TaintEffectNoSchedule})
	if r.IsReady(tainted) {
		t.Error("a newer object of a ready node, with a startup taint, is ready")
	}
	advertised := gpuNode("young", 1)
	if !r.IsReady(advertised) {
		t.Error("a newer object of a node now advertising its GPU is not ready")
	}
}
