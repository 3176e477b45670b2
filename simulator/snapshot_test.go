package simulator

import (
	"reflect"
	"sort"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// podsOn lists "namespace/name" of the pods the snapshot has on nodeName,
// sorted; nil when the node is absent.
func podsOn(t *testing.T, s *ClusterSnapshot, nodeName string) []string {
	t.Helper()
	ni, err := s.GetNodeInfo(nodeName)
	if err != nil {
		return nil
	}
	out := []string{}
	for _, p := range ni.Pods() {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

func requestedCPU(t *testing.T, s *ClusterSnapshot, nodeName string) int64 {
	t.Helper()
	info, ok := s.nodes[nodeName]
	if !ok {
		t.Fatalf("node %s missing", nodeName)
	}
	return info.Requested.MilliCPU
}

func TestSetClusterStateKeepsBoundLivePodsOnly(t *testing.T) {
	done := BoundPod("done", 100, MiB, "n1")
	done.Status.Phase = apiv1.PodSucceeded
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 1000, GiB), Node("n2", 1000, GiB)}, []*apiv1.Pod{
		BoundPod("a", 100, MiB, "n1"),
		BoundPod("b", 200, MiB, "n2"),
		BoundPod("lost", 100, MiB, "gone"),
		Pod("pending", 100, MiB),
		done,
	})
	if got := podsOn(t, s, "n1"); !reflect.DeepEqual(got, []string{"default/a"}) {
		t.Errorf("n1 pods = %v", got)
	}
	if got := podsOn(t, s, "n2"); !reflect.DeepEqual(got, []string{"default/b"}) {
		t.Errorf("n2 pods = %v", got)
	}
	if got := s.NodeNames(); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("NodeNames = %v", got)
	}
	if err := s.SetClusterState([]*apiv1.Node{Node("x", 1, 1), Node("x", 1, 1)}, nil); err == nil {
		t.Errorf("duplicate node names must be refused")
	}
}

func TestSnapshotAddRemove(t *testing.T) {
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 1000, GiB)}, nil)
	if err := s.AddPod(Pod("p", 300, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPod(Pod("q", 200, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, s, "n1"); got != 500 {
		t.Errorf("requested cpu = %d, want 500", got)
	}
	if err := s.RemovePod("default", "p", "n1"); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, s, "n1"); got != 200 {
		t.Errorf("requested cpu after removal = %d, want 200", got)
	}
	if err := s.RemovePod("default", "p", "n1"); err == nil {
		t.Errorf("removing a pod twice must fail")
	}
	if err := s.AddPod(Pod("r", 1, 1), "nope"); err == nil {
		t.Errorf("adding to an unknown node must fail")
	}
	if err := s.AddNodeInfo(framework.NewNodeInfo(Node("n1", 1, 1))); err == nil {
		t.Errorf("adding an existing node must fail")
	}
	if err := s.AddNodeInfo(framework.NewNodeInfo(Node("n2", 2000, GiB), BoundPod("ds", 100, MiB, "n2"))); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, s, "n2"); got != 100 {
		t.Errorf("n2 requested cpu = %d, want 100 (the pod it came with)", got)
	}
	if err := s.RemoveNode("n2"); err != nil {
		t.Fatal(err)
	}
	if s.HasNode("n2") || len(s.NodeInfos()) != 1 {
		t.Errorf("n2 should be gone, nodes = %v", s.NodeNames())
	}
	if err := s.RemoveNode("n2"); err == nil {
		t.Errorf("removing a node twice must fail")
	}
}

func TestForkRevertRestoresEverything(t *testing.T) {
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 1000, GiB), Node("n2", 1000, GiB)},
		[]*apiv1.Pod{BoundPod("a", 100, MiB, "n1"), BoundPod("b", 100, MiB, "n2")})
	before1, before2 := s.nodes["n1"], s.nodes["n2"]

	s.Fork()
	if err := s.AddPod(Pod("x", 400, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePod("default", "b", "n2"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddNodeInfo(framework.NewNodeInfo(Node("n3", 1000, GiB))); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveNode("n1"); err != nil {
		t.Fatal(err)
	}
	if got := s.NodeNames(); !reflect.DeepEqual(got, []string{"n2", "n3"}) {
		t.Fatalf("inside fork nodes = %v", got)
	}
	// Copy-on-write: the NodeInfos of the base were not modified in place.
	if before1.Requested.MilliCPU != 100 || len(before2.Pods) != 1 {
		t.Fatalf("fork changed the base layer's objects: n1 cpu %d, n2 pods %d", before1.Requested.MilliCPU, len(before2.Pods))
	}
	s.Revert()

	if got := s.NodeNames(); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("after revert nodes = %v", got)
	}
	if got := podsOn(t, s, "n1"); !reflect.DeepEqual(got, []string{"default/a"}) {
		t.Errorf("after revert n1 pods = %v", got)
	}
	if got := podsOn(t, s, "n2"); !reflect.DeepEqual(got, []string{"default/b"}) {
		t.Errorf("after revert n2 pods = %v", got)
	}
	if got := requestedCPU(t, s, "n1"); got != 100 {
		t.Errorf("after revert n1 requested cpu = %d", got)
	}
	if s.ForkDepth() != 0 {
		t.Errorf("fork depth = %d", s.ForkDepth())
	}
}

func TestNestedForkCommitRevert(t *testing.T) {
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 4000, 4*GiB)}, nil)

	s.Fork() // outer
	if err := s.AddPod(Pod("outer", 100, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	s.Fork() // inner, committed
	if err := s.AddPod(Pod("inner", 100, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddNodeInfo(framework.NewNodeInfo(Node("n2", 1000, GiB))); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := podsOn(t, s, "n1"); !reflect.DeepEqual(got, []string{"default/inner", "default/outer"}) {
		t.Errorf("after commit n1 pods = %v", got)
	}
	s.Fork() // inner, reverted
	if err := s.AddPod(Pod("dropped", 100, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveNode("n2"); err != nil {
		t.Fatal(err)
	}
	s.Revert()
	if got := podsOn(t, s, "n1"); !reflect.DeepEqual(got, []string{"default/inner", "default/outer"}) {
		t.Errorf("after inner revert n1 pods = %v", got)
	}
	if !s.HasNode("n2") {
		t.Errorf("inner revert must bring n2 back")
	}
	// The outer revert drops what the committed inner layer did too.
	s.Revert()
	if got := podsOn(t, s, "n1"); len(got) != 0 {
		t.Errorf("after outer revert n1 pods = %v", got)
	}
	if s.HasNode("n2") {
		t.Errorf("outer revert must drop n2")
	}
	if err := s.Commit(); err == nil {
		t.Errorf("commit without a fork must fail")
	}
	s.Revert() // without a fork: no-op
}

func TestCommitToBaseKeepsChanges(t *testing.T) {
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 4000, 4*GiB)}, nil)
	s.Fork()
	if err := s.AddPod(Pod("kept", 100, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	s.Revert() // nothing to revert any more
	if got := podsOn(t, s, "n1"); !reflect.DeepEqual(got, []string{"default/kept"}) {
		t.Errorf("n1 pods = %v", got)
	}
}

func TestFrameworkListsFollowForks(t *testing.T) {
	anti := WithAntiAffinity(BoundPod("anti", 100, MiB, "n1"), apiv1.LabelHostname)
	anti.Labels["app"] = "web"
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 1000, GiB), Node("n2", 1000, GiB)}, []*apiv1.Pod{anti})
	l := &frameworkLister{snapshot: s}
	count := func() (int, int, int) {
		all, _ := l.NodeInfos().List()
		aff, _ := l.NodeInfos().HavePodsWithAffinityList()
		antiL, _ := l.NodeInfos().HavePodsWithRequiredAntiAffinityList()
		return len(all), len(aff), len(antiL)
	}
	if a, b, c := count(); a != 2 || b != 1 || c != 1 {
		t.Fatalf("lists = %d,%d,%d want 2,1,1", a, b, c)
	}
	s.Fork()
	p := WithAntiAffinity(Pod("anti2", 100, MiB), apiv1.LabelHostname)
	if err := s.AddPod(p, "n2"); err != nil {
		t.Fatal(err)
	}
	if a, b, c := count(); a != 2 || b != 2 || c != 2 {
		t.Errorf("in fork lists = %d,%d,%d want 2,2,2", a, b, c)
	}
	got, _ := l.NodeInfos().Get("n2")
	if len(got.GetPods()) != 1 {
		t.Errorf("Get(n2) shows %d pods, want 1", len(got.GetPods()))
	}
	s.Revert()
	if a, b, c := count(); a != 2 || b != 1 || c != 1 {
		t.Errorf("after revert lists = %d,%d,%d want 2,1,1", a, b, c)
	}
	if _, err := l.NodeInfos().Get("nope"); err == nil {
		t.Errorf("Get of an unknown node must fail")
	}
}

func TestAddEquivalentPod(t *testing.T) {
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 4000, 4*GiB), Node("n2", 4000, 4*GiB)}, nil)
	pods := ReplicaSetPods("web", 3, 300, 64*MiB)
	s.Fork()
	for i, p := range pods {
		node := "n1"
		if i == 2 {
			node = "n2"
		}
		if err := s.AddEquivalentPod(p, pods[0], node); err != nil {
			t.Fatal(err)
		}
	}
	if got := requestedCPU(t, s, "n1"); got != 600 {
		t.Errorf("n1 requested cpu = %d, want 600", got)
	}
	if got := s.nodes["n2"].Requested.Memory; got != 64*MiB {
		t.Errorf("n2 requested memory = %d, want %d", got, 64*MiB)
	}
	ni, _ := s.GetNodeInfo("n2")
	if len(ni.Pods()) != 1 || ni.Pods()[0].Name != "web-2" || ni.Pods()[0].Spec.NodeName != "n2" {
		t.Errorf("n2 holds %v", ni.Pods())
	}
	if pods[2].Spec.NodeName != "" {
		t.Errorf("caller's pod was modified")
	}
	if err := s.RemovePod("default", "web-0", "n1"); err != nil || requestedCPU(t, s, "n1") != 300 {
		t.Errorf("removing a shared-data pod: %v, requested %d", err, requestedCPU(t, s, "n1"))
	}
	s.Revert()
	if len(s.podInfoTemplates) != 0 {
		t.Errorf("the exemplar cache outlives the forks")
	}
}

// The framework's node list is edited in place on additions, removals and
// reverted removals; it must stay what a rebuild gives: sorted by name, and
// each entry the node's current NodeInfo.
func TestNodeListFollowsRemovalsAndReverts(t *testing.T) {
	s := snapshotOf(t, []*apiv1.Node{Node("n3", 1000, GiB), Node("n1", 1000, GiB), Node("n4", 1000, GiB), Node("n2", 1000, GiB)}, nil)
	names := func() []string {
		var out []string
		for _, ni := range s.nodeList() {
			out = append(out, ni.Node().Name)
			if ni != s.nodes[ni.Node().Name] {
				t.Errorf("list entry of %s is not its current NodeInfo", ni.Node().Name)
			}
		}
		return out
	}
	want := func(step string, w ...string) {
		t.Helper()
		if got := names(); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: list %v, want %v", step, got, w)
		}
	}
	want("start", "n1", "n2", "n3", "n4")
	s.Fork()
	if err := s.RemoveNode("n2"); err != nil {
		t.Fatal(err)
	}
	want("n2 removed", "n1", "n3", "n4")
	if err := s.AddPod(Pod("p", 100, MiB), "n3"); err != nil {
		t.Fatal(err)
	}
	s.Fork()
	if err := s.RemoveNode("n4"); err != nil {
		t.Fatal(err)
	}
	want("n4 removed", "n1", "n3")
	s.Revert()
	want("n4 back", "n1", "n3", "n4")
	s.Revert()
	want("n2 back", "n1", "n2", "n3", "n4")
	if len(podsOn(t, s, "n3")) != 0 {
		t.Errorf("pod placed in a reverted fork is still on n3")
	}
	s.Fork()
	if err := s.AddNodeInfo(framework.NewNodeInfo(Node("n0", 1000, GiB))); err != nil {
		t.Fatal(err)
	}
	want("n0 added in its place", "n0", "n1", "n2", "n3", "n4")
	if err := s.RemoveNode("n1"); err != nil {
		t.Fatal(err)
	}
	want("n1 removed after an addition", "n0", "n2", "n3", "n4")
	s.Revert()
	want("reverted", "n1", "n2", "n3", "n4")
}

// Version names the content: a change gives a version never seen before,
// Revert returns to the version of the content it restores, and another
// change in a later fork does not reuse a dropped version.
func TestVersionNamesTheContent(t *testing.T) {
	s := NewClusterSnapshot()
	if err := s.SetClusterState([]*apiv1.Node{Node("n1", 2000, GiB), Node("n2", 2000, GiB)}, nil); err != nil {
		t.Fatal(err)
	}
	base := s.Version()
	seen := map[uint64]bool{base: true}
	expectNew := func(what string) {
		t.Helper()
		if seen[s.Version()] {
			t.Fatalf("%s: version %d already used", what, s.Version())
		}
		seen[s.Version()] = true
	}
	s.Fork()
	if s.Version() != base {
		t.Fatalf("Fork changed the version")
	}
	if err := s.AddPod(Pod("a", 100, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	expectNew("AddPod")
	if err := s.RemoveNode("n2"); err != nil {
		t.Fatal(err)
	}
	expectNew("RemoveNode")
	s.Revert()
	if s.Version() != base {
		t.Fatalf("Revert: version %d, want the base's %d", s.Version(), base)
	}
	s.Fork()
	if err := s.AddPod(Pod("b", 100, MiB), "n1"); err != nil {
		t.Fatal(err)
	}
	expectNew("AddPod in a later fork")
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePod("default", "b", "n1"); err != nil {
		t.Fatal(err)
	}
	expectNew("RemovePod outside any fork")
	if err := s.AddNodeInfo(framework.NewNodeInfo(Node("n3", 2000, GiB))); err != nil {
		t.Fatal(err)
	}
	expectNew("AddNodeInfo")
	v := s.Version()
	if err := s.SetDRA(nil); err != nil || s.Version() != v {
		t.Fatalf("setting no DRA objects over none changed the version (err %v)", err)
	}
}

// RefreshNode swaps a node's object in the base, keeping its pods and the
// version, and refuses inside a fork (a revert could not undo it).
func TestRefreshNode(t *testing.T) {
	s := NewClusterSnapshot()
	n := Node("n1", 4000, 8*GiB)
	if err := s.SetClusterState([]*apiv1.Node{n}, []*apiv1.Pod{BoundPod("p", 100, GiB, "n1")}); err != nil {
		t.Fatal(err)
	}
	v := s.Version()
	beat := n.DeepCopy()
	if err := s.RefreshNode(beat); err != nil {
		t.Fatal(err)
	}
	ni, err := s.GetNodeInfo("n1")
	if err != nil || ni.Node() != beat || len(ni.Pods()) != 1 || s.Version() != v {
		t.Fatalf("after RefreshNode: node %p (want %p), %d pods, version %d→%d, err %v", ni.Node(), beat, len(ni.Pods()), v, s.Version(), err)
	}
	if err := s.RefreshNode(Node("n2", 4000, 8*GiB)); err == nil {
		t.Error("a node not in the snapshot was refreshed")
	}
	s.Fork()
	defer s.Revert()
	if err := s.RefreshNode(n.DeepCopy()); err == nil {
		t.Error("RefreshNode inside a fork did not fail")
	}
}
