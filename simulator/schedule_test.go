package simulator

import (
	"fmt"
	"reflect"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

func groupSizes(groups []PodEquivalenceGroup) []int {
	out := []int{}
	for _, g := range groups {
		out = append(out, len(g.Pods))
	}
	return out
}

func TestGroupPods(t *testing.T) {
	web := ReplicaSetPods("web", 3, 100, MiB)
	api := ReplicaSetPods("api", 2, 200, MiB)
	// Pods without a controller: grouped when the scheduler sees them alike.
	bare1, bare2, bare3 := Pod("bare1", 100, MiB), Pod("bare2", 100, MiB), Pod("bare3", 300, MiB)
	// Same owner, different request: a different group.
	odd := ReplicaSetPods("web", 1, 100, MiB)[0]
	odd.Name = "web-odd"
	odd.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = *resource.NewMilliQuantity(900, resource.DecimalSI)
	// Same owner, different toleration.
	tol := ReplicaSetPods("web", 1, 100, MiB)[0]
	tol.Name = "web-tol"
	tol.Spec.Tolerations = []apiv1.Toleration{{Key: "x", Operator: apiv1.TolerationOpExists}}

	groups := GroupPods([]*apiv1.Pod{web[0], api[0], bare1, web[1], odd, bare2, api[1], web[2], tol, bare3})
	if got, want := groupSizes(groups), []int{3, 2, 2, 1, 1, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("group sizes = %v, want %v", got, want)
	}
	if groups[0].Exemplar() != web[0] || groups[2].Pods[0] != bare1 || groups[2].Pods[1] != bare2 || groups[5].Pods[0] != bare3 {
		t.Errorf("groups out of first-appearance order")
	}
	if (PodEquivalenceGroup{}).Exemplar() != nil {
		t.Errorf("empty group has no exemplar")
	}
}

func TestTrySchedulePods(t *testing.T) {
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 2000, 4*GiB), Node("n2", 2000, 4*GiB)},
		[]*apiv1.Pod{BoundPod("running", 1000, GiB, "n1")})
	pods := ReplicaSetPods("web", 4, 1000, MiB) // room for 3: one on n1, two on n2
	big := Pod("big", 3000, MiB)

	scheduled, unschedulable, err := TrySchedulePods(c, s, append(pods, big))
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]string{}
	for _, sp := range scheduled {
		where[sp.Pod.Name] = sp.NodeName
	}
	want := map[string]string{"web-0": "n1", "web-1": "n2", "web-2": "n2"}
	if !reflect.DeepEqual(where, want) {
		t.Errorf("placements = %v, want %v", where, want)
	}
	var names []string
	for _, p := range unschedulable {
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(names, []string{"web-3", "big"}) {
		t.Errorf("unschedulable = %v", names)
	}
	// The placements are in the snapshot; the caller's pods are untouched.
	if got := requestedCPU(t, s, "n2"); got != 2000 {
		t.Errorf("n2 requested cpu = %d, want 2000", got)
	}
	if pods[1].Spec.NodeName != "" {
		t.Errorf("caller's pod object was modified")
	}
	ni, _ := s.GetNodeInfo("n2")
	for _, p := range ni.Pods() {
		if p.Spec.NodeName != "n2" {
			t.Errorf("pod %s stored on n2 says nodeName %q", p.Name, p.Spec.NodeName)
		}
	}
}

func TestTrySchedulePodsEquivalenceShortCut(t *testing.T) {
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 1000, GiB)}, nil)
	// Counting filter calls: after the first failure the group is not tried.
	pods := ReplicaSetPods("huge", 100, 5000, MiB)
	before := len(s.NodeNames())
	scheduled, unschedulable, err := TrySchedulePods(c, s, pods)
	if err != nil || len(scheduled) != 0 || len(unschedulable) != 100 {
		t.Fatalf("got %d scheduled, %d unschedulable, %v", len(scheduled), len(unschedulable), err)
	}
	if len(s.NodeNames()) != before {
		t.Errorf("snapshot nodes changed")
	}
}

func TestTrySchedulePodsAntiAffinityOnePerNode(t *testing.T) {
	c := testChecker(t)
	var nodes []*apiv1.Node
	for i := 0; i < 3; i++ {
		nodes = append(nodes, Node(fmt.Sprintf("n%d", i), 4000, 4*GiB))
	}
	s := snapshotOf(t, nodes, nil)
	pods := ReplicaSetPods("db", 5, 100, MiB)
	for _, p := range pods {
		WithAntiAffinity(p, apiv1.LabelHostname)
	}
	scheduled, unschedulable, err := TrySchedulePods(c, s, pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(scheduled) != 3 || len(unschedulable) != 2 {
		t.Fatalf("scheduled %d, unschedulable %d; want 3 and 2", len(scheduled), len(unschedulable))
	}
	seen := map[string]bool{}
	for _, sp := range scheduled {
		if seen[sp.NodeName] {
			t.Errorf("two anti-affine pods on %s", sp.NodeName)
		}
		seen[sp.NodeName] = true
	}
}

func TestTrySchedulePodsTopologySpreadAcrossZones(t *testing.T) {
	c := testChecker(t)
	const zone = apiv1.LabelTopologyZone
	nodes := []*apiv1.Node{
		WithLabel(Node("a1", 8000, 8*GiB), zone, "a"),
		WithLabel(Node("a2", 8000, 8*GiB), zone, "a"),
		WithLabel(Node("b1", 8000, 8*GiB), zone, "b"),
	}
	s := snapshotOf(t, nodes, nil)
	pods := ReplicaSetPods("web", 6, 100, MiB)
	for _, p := range pods {
		WithTopologySpread(p, zone, 1)
	}
	scheduled, unschedulable, err := TrySchedulePods(c, s, pods)
	if err != nil || len(unschedulable) != 0 {
		t.Fatalf("unschedulable %d, err %v", len(unschedulable), err)
	}
	perZone := map[string]int{}
	for _, sp := range scheduled {
		if sp.NodeName == "b1" {
			perZone["b"]++
		} else {
			perZone["a"]++
		}
	}
	if perZone["a"] != 3 || perZone["b"] != 3 {
		t.Errorf("per zone = %v, want 3/3 with maxSkew 1", perZone)
	}
}

// Once upcoming nodes are added, pods that fit no existing node try only
// those; a pod whose fit depends on other nodes (here anti-affinity) tries
// every node, since the added ones may have changed the answer elsewhere.
func TestTrySchedulePodsOnNewTriesOnlyAddedNodesUnlessOthersMatter(t *testing.T) {
	c := testChecker(t)
	// "a-old" fits everything and comes first by name: a pod placed there
	// was tried on an old node.
	s := snapshotOf(t, []*apiv1.Node{Node("a-old", 4000, 4*GiB), Node("b-new", 4000, 4*GiB)}, nil)
	added := map[string]bool{"b-new": true}
	plain := ReplicaSetPods("plain", 1, 100, MiB)
	spread := ReplicaSetPods("spread", 1, 100, MiB)
	WithAntiAffinity(spread[0], apiv1.LabelHostname)
	scheduled, unschedulable, err := TrySchedulePodsOnNew(c, s, append(plain, spread...), added)
	if err != nil || len(unschedulable) != 0 {
		t.Fatalf("unschedulable %v, err %v", unschedulable, err)
	}
	got := map[string]string{}
	for _, sp := range scheduled {
		got[sp.Pod.Name] = sp.NodeName
	}
	if got[plain[0].Name] != "b-new" {
		t.Errorf("plain pod placed on %q, want the added node b-new only", got[plain[0].Name])
	}
	if got[spread[0].Name] != "a-old" {
		t.Errorf("anti-affine pod placed on %q, want the first node by name, a-old: its fit depends on other nodes", got[spread[0].Name])
	}
}

// Pending pods are packed on new nodes higher priority first, and within a
// priority largest first, cpu and memory weighed as shares of the nodes'.
func TestPackingOrder(t *testing.T) {
	alloc := Node("n", 4000, 8*GiB).Status.Allocatable
	important := Pod("important-small", 100, 100*MiB)
	high := int32(1000)
	important.Spec.Priority = &high
	pods := []*apiv1.Pod{
		Pod("small", 250, 256*MiB),
		Pod("cpu", 1500, 512*MiB), // 0.375 + 0.0625
		Pod("mem", 500, 5*GiB),    // 0.125 + 0.625
		important,
		Pod("small-2", 250, 256*MiB),
	}
	var got []string
	for _, p := range PackingOrder(pods, alloc) {
		got = append(got, p.Name)
	}
	want := []string{"important-small", "mem", "cpu", "small", "small-2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
