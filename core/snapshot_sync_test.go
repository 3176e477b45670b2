package core

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

// contents renders a snapshot as node → sorted pod UIDs (+ node labels).
func contents(t *testing.T, s *simulator.ClusterSnapshot) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ni := range s.NodeInfos() {
		var uids []string
		for _, p := range ni.Pods() {
			uids = append(uids, string(p.UID)+"@"+p.ResourceVersion)
		}
		sort.Strings(uids)
		out[ni.Node().Name] = fmt.Sprint(ni.Node().Labels) + fmt.Sprint(uids)
	}
	return out
}

// The incremental base must always equal a snapshot built from scratch,
// whatever changes between iterations, and forks must not leak into it.
func TestSnapshotSyncMatchesRebuild(t *testing.T) {
	rnd := rand.New(rand.NewSource(3))
	var nodes []*apiv1.Node
	var pods []*apiv1.Pod
	rv := 1
	next := func() string { rv++; return strconv.Itoa(rv) }
	for i := 0; i < 20; i++ {
		n := test.BuildNode(fmt.Sprintf("n%d", i), 4000, 8*test.GiB)
		n.ResourceVersion = next()
		nodes = append(nodes, n)
	}
	podSeq := 0
	newPod := func() *apiv1.Pod {
		podSeq++
		p := test.BuildScheduledPod(fmt.Sprintf("p%d", podSeq), 10, test.MiB, "rs", nodes[rnd.Intn(len(nodes))].Name)
		p.ResourceVersion = next()
		return p
	}
	for i := 0; i < 200; i++ {
		pods = append(pods, newPod())
	}
	sync := newSnapshotSync(simulator.NewClusterSnapshot())
	for round := 0; round < 300; round++ {
		if err := sync.begin(nodes, pods, nil); err != nil {
			t.Fatal(err)
		}
		// Simulated work in the iteration's layer must not reach the base.
		_ = sync.snap.AddPod(test.BuildScheduledPod("sim", 10, test.MiB, "", nodes[0].Name), nodes[0].Name)
		sync.end()
		got := contents(t, sync.snap)
		ref := simulator.NewClusterSnapshot()
		if err := ref.SetClusterState(nodes, pods); err != nil {
			t.Fatal(err)
		}
		want := contents(t, ref)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: incremental snapshot differs from a rebuild\n got %v\nwant %v", round, got, want)
		}
		// Mutate: add/remove/update pods, finish some, update/replace/remove/add nodes.
		for i := 0; i < 10; i++ {
			switch k := rnd.Intn(6); {
			case k == 0 && len(pods) > 0:
				j := rnd.Intn(len(pods))
				pods = append(pods[:j], pods[j+1:]...)
			case k == 1:
				pods = append(pods, newPod())
			case k == 2 && len(pods) > 0:
				j := rnd.Intn(len(pods))
				c := pods[j].DeepCopy()
				c.ResourceVersion = next()
				if rnd.Intn(2) == 0 {
					c.Status.Phase = apiv1.PodSucceeded
				}
				pods[j] = c
			case k == 3:
				j := rnd.Intn(len(nodes))
				c := nodes[j].DeepCopy()
				c.ResourceVersion = next()
				if rnd.Intn(2) == 0 {
					c.Labels["rev"] = c.ResourceVersion
				} else {
					c.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue,
						LastHeartbeatTime: metav1.Unix(int64(rv), 0)}}
				}
				nodes[j] = c
			case k == 4 && len(nodes) > 5:
				j := rnd.Intn(len(nodes))
				nodes = append(nodes[:j], nodes[j+1:]...)
			case k == 5:
				n := test.BuildNode(fmt.Sprintf("n%d", 100+round*10+i), 4000, 8*test.GiB)
				n.ResourceVersion = next()
				n.UID = types.UID("u" + n.ResourceVersion)
				nodes = append(nodes, n)
			}
		}
	}
	// Every change above is one the incremental update handles: only the
	// first iteration builds the snapshot from scratch.
	if sync.rebuilds != 1 {
		t.Fatalf("the snapshot was rebuilt %d times, want only the first time", sync.rebuilds)
	}
}

// A node whose status update only renews its heartbeat leaves the snapshot
// as it was (same version: a scale-down loop's simulations can be reused);
// any other change gives a new version.
func TestSnapshotSyncHeartbeatKeepsVersion(t *testing.T) {
	n := test.BuildNode("n1", 4000, 8*test.GiB)
	n.ResourceVersion = "1"
	pods := []*apiv1.Pod{test.BuildScheduledPod("p1", 10, test.MiB, "rs", "n1")}
	sync := newSnapshotSync(simulator.NewClusterSnapshot())
	step := func(n *apiv1.Node) uint64 {
		t.Helper()
		if err := sync.begin([]*apiv1.Node{n}, pods, nil); err != nil {
			t.Fatal(err)
		}
		defer sync.end()
		return sync.snap.Version()
	}
	v1 := step(n)
	beat := n.DeepCopy()
	beat.ResourceVersion = "2"
	for i := range beat.Status.Conditions {
		beat.Status.Conditions[i].LastHeartbeatTime = metav1.Unix(1e9, 0)
	}
	if v := step(beat); v != v1 {
		t.Fatalf("a heartbeat changed the snapshot's version (%d → %d)", v1, v)
	}
	// The snapshot holds the current object, not the one before: the
	// previous would stay alive beside the informer's.
	if ni, err := sync.snap.GetNodeInfo("n1"); err != nil || ni.Node() != beat {
		t.Fatalf("after a heartbeat the snapshot holds %p, want the new object %p (err %v)", ni.Node(), beat, err)
	}
	soft := beat.DeepCopy()
	soft.ResourceVersion = "2a"
	soft.Spec.Taints = append(soft.Spec.Taints, apiv1.Taint{Key: "DeletionCandidateOfClusterAutoscaler", Value: "1700000000",
		Effect: apiv1.TaintEffectPreferNoSchedule})
	if v := step(soft); v != v1 {
		t.Fatalf("a soft taint changed the snapshot's version (%d → %d)", v1, v)
	}
	hard := soft.DeepCopy()
	hard.ResourceVersion = "2b"
	hard.Spec.Taints = append(hard.Spec.Taints, apiv1.Taint{Key: "dedicated", Value: "gpu", Effect: apiv1.TaintEffectNoSchedule})
	v1 = step(hard)
	if v1 == step(soft) {
		t.Fatalf("a NoSchedule taint kept the snapshot's version")
	}
	notReady := beat.DeepCopy()
	notReady.ResourceVersion = "3"
	notReady.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionFalse}}
	v2 := step(notReady)
	if v2 == v1 {
		t.Fatalf("a node turning NotReady kept the snapshot's version")
	}
	labelled := notReady.DeepCopy()
	labelled.ResourceVersion = "4"
	labelled.Labels["x"] = "y"
	if v := step(labelled); v == v2 {
		t.Fatalf("a new label kept the snapshot's version")
	}
}
