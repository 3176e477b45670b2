package simulator

import (
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

var defaultDrain = drain.Options{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true, SkipNodesWithCustomControllerPods: true}

func rsPod(name string, cpu int64, node string) *apiv1.Pod {
	p := BoundPod(name, cpu, MiB, node)
	p.Labels["app"] = "web"
	return OwnedBy(p, "ReplicaSet", "web", types.UID("rs-web"))
}

func dsPod(name string, cpu int64, node string) *apiv1.Pod {
	p := BoundPod(name, cpu, MiB, node)
	p.Namespace = "kube-system"
	return OwnedBy(p, "DaemonSet", "agent", types.UID("ds-agent"))
}

func TestSimulateNodeRemoval(t *testing.T) {
	c := testChecker(t)
	now := time.Now()
	nodes := []*apiv1.Node{Node("n1", 2000, 4*GiB), Node("n2", 2000, 4*GiB), Node("n3", 2000, 4*GiB)}
	pods := []*apiv1.Pod{
		rsPod("a", 500, "n1"), rsPod("b", 500, "n1"), dsPod("ds1", 100, "n1"),
		rsPod("c", 1500, "n2"), dsPod("ds2", 100, "n2"),
		rsPod("d", 800, "n3"), dsPod("ds3", 100, "n3"),
	}

	t.Run("pods fit elsewhere", func(t *testing.T) {
		s := snapshotOf(t, nodes, pods)
		r := NewRemovalSimulator(c, s, defaultDrain)
		ok, bad := r.SimulateNodeRemoval("n1", nil, nil, now)
		if bad != nil {
			t.Fatalf("n1 should be removable: %v", bad)
		}
		if len(ok.PodsToReschedule) != 2 || ok.Node.Name != "n1" {
			t.Errorf("to reschedule %d pods of %s, want 2 of n1 (the DaemonSet pod stays)", len(ok.PodsToReschedule), ok.Node.Name)
		}
		if s.HasNode("n1") {
			t.Errorf("on success the node is removed from the snapshot")
		}
		// a and b (0.5 cpu each) only fit n3 (0.9 cpu used of 2).
		if got := requestedCPU(t, s, "n3"); got != 1900 {
			t.Errorf("n3 requested = %d, want 1900 (both moved pods)", got)
		}
		// Later candidates see that load: n3's pod has nowhere to go now.
		_, bad = r.SimulateNodeRemoval("n3", nil, nil, now)
		if bad == nil || bad.Reason != NoPlaceToMovePods {
			t.Errorf("n3 after n1's removal: %v, want NoPlaceToMovePods", bad)
		}
		if !s.HasNode("n3") || requestedCPU(t, s, "n3") != 1900 {
			t.Errorf("a failed simulation must leave the snapshot unchanged")
		}
	})

	t.Run("no place to move", func(t *testing.T) {
		s := snapshotOf(t, nodes, pods)
		r := NewRemovalSimulator(c, s, defaultDrain)
		// c (1.5 cpu) fits neither n1 (1.1 used) nor n3 (0.9 used).
		_, bad := r.SimulateNodeRemoval("n2", nil, nil, now)
		if bad == nil || bad.Reason != NoPlaceToMovePods || bad.Node.Name != "n2" {
			t.Fatalf("got %v, want NoPlaceToMovePods", bad)
		}
		if !s.HasNode("n2") || s.ForkDepth() != 0 {
			t.Errorf("snapshot changed by a failed simulation")
		}
	})

	t.Run("destinations restrict", func(t *testing.T) {
		s := snapshotOf(t, nodes, pods)
		r := NewRemovalSimulator(c, s, defaultDrain)
		_, bad := r.SimulateNodeRemoval("n1", map[string]bool{"n2": true}, nil, now)
		if bad == nil || bad.Reason != NoPlaceToMovePods {
			t.Errorf("only n2 allowed (no room): got %v", bad)
		}
		ok, bad := r.SimulateNodeRemoval("n1", map[string]bool{"n3": true, "n1": true}, nil, now)
		if bad != nil || len(ok.PodsToReschedule) != 2 {
			t.Errorf("n3 allowed: got %v %v", ok, bad)
		}
	})

	t.Run("blocked by pod", func(t *testing.T) {
		bare := BoundPod("bare", 100, MiB, "n1")
		s := snapshotOf(t, nodes, append([]*apiv1.Pod{bare}, pods...))
		r := NewRemovalSimulator(c, s, defaultDrain)
		_, bad := r.SimulateNodeRemoval("n1", nil, nil, now)
		if bad == nil || bad.Reason != BlockedByPod || bad.BlockingPod == nil || bad.BlockingPod.Reason != drain.NotReplicated || bad.BlockingPod.Pod.Name != "bare" {
			t.Errorf("got %v, want BlockedByPod/NotReplicated by bare", bad)
		}
	})

	t.Run("blocked by pdb", func(t *testing.T) {
		s := snapshotOf(t, nodes, pods)
		r := NewRemovalSimulator(c, s, defaultDrain)
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
		}
		_, bad := r.SimulateNodeRemoval("n1", nil, []*policyv1.PodDisruptionBudget{pdb}, now)
		if bad == nil || bad.BlockingPod == nil || bad.BlockingPod.Reason != drain.NotEnoughPdb {
			t.Errorf("two pods under a PDB allowing one disruption: got %v", bad)
		}
	})

	t.Run("anti-affinity keeps moved pods apart", func(t *testing.T) {
		// Three nodes each running one anti-affine replica: removing one leaves
		// its replica nowhere to go even though there is plenty of cpu.
		var ps []*apiv1.Pod
		for i, n := range []string{"n1", "n2", "n3"} {
			p := WithAntiAffinity(rsPod(string(rune('x'+i)), 100, n), apiv1.LabelHostname)
			ps = append(ps, p)
		}
		s := snapshotOf(t, nodes, ps)
		r := NewRemovalSimulator(c, s, defaultDrain)
		if _, bad := r.SimulateNodeRemoval("n2", nil, nil, now); bad == nil || bad.Reason != NoPlaceToMovePods {
			t.Errorf("got %v, want NoPlaceToMovePods", bad)
		}
	})

	t.Run("unknown node", func(t *testing.T) {
		s := snapshotOf(t, nodes, pods)
		r := NewRemovalSimulator(c, s, defaultDrain)
		if _, bad := r.SimulateNodeRemoval("ghost", nil, nil, now); bad == nil || bad.Reason != NoNodeInfo || bad.Node.Name != "ghost" {
			t.Errorf("got %v", bad)
		}
	})

	t.Run("empty node", func(t *testing.T) {
		s := snapshotOf(t, nodes, []*apiv1.Pod{dsPod("only-ds", 100, "n1")})
		r := NewRemovalSimulator(c, s, defaultDrain)
		ok, bad := r.SimulateNodeRemoval("n1", nil, nil, now)
		if bad != nil || len(ok.PodsToReschedule) != 0 {
			t.Errorf("a node with only DaemonSet pods is removable with nothing to move: %v %v", ok, bad)
		}
	})
}

// A replay repeats a removal on a snapshot in the same state: the same
// snapshot content as a fresh simulation, without the search. It gives up,
// the snapshot untouched, when the node's pods to move or a destination are
// not those of the removal it repeats.
func TestReplayNodeRemoval(t *testing.T) {
	c := testChecker(t)
	now := time.Now()
	nodes := []*apiv1.Node{Node("n1", 2000, 4*GiB), Node("n2", 2000, 4*GiB), Node("n3", 2000, 4*GiB)}
	pods := []*apiv1.Pod{rsPod("a", 500, "n1"), rsPod("b", 500, "n1"), rsPod("c", 1600, "n2"), rsPod("d", 800, "n3")}
	first, bad := NewRemovalSimulator(c, snapshotOf(t, nodes, pods), defaultDrain).SimulateNodeRemoval("n1", nil, nil, now)
	if bad != nil {
		t.Fatal(bad)
	}
	if got := first.Destinations; len(got) != 2 || got[0] != "n3" || got[1] != "n3" {
		t.Fatalf("destinations %v, want [n3 n3]", got)
	}

	t.Run("same state", func(t *testing.T) {
		s := snapshotOf(t, nodes, pods)
		r, ok := NewRemovalSimulator(c, s, defaultDrain).ReplayNodeRemoval(first, nil, nil, now)
		if !ok || len(r.PodsToReschedule) != 2 || s.HasNode("n1") || requestedCPU(t, s, "n3") != 1800 {
			t.Fatalf("replay: ok %v, removal %+v; n1 kept %v, n3 requested %d; want n1 gone, a and b on n3",
				ok, r, s.HasNode("n1"), requestedCPU(t, s, "n3"))
		}
	})
	refused := []struct {
		name  string
		pods  []*apiv1.Pod
		nodes []*apiv1.Node
		dest  map[string]bool
	}{
		{"a pod added to the node", append([]*apiv1.Pod{rsPod("e", 100, "n1")}, pods...), nodes, nil},
		{"a pod of the node changed", append([]*apiv1.Pod{withVersion(rsPod("a", 500, "n1"), "2")}, pods[1:]...), nodes, nil},
		{"the destination gone", pods, nodes[:2], nil},
		{"the destination no longer allowed", pods, nodes, map[string]bool{"n2": true}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf(t, tc.nodes, tc.pods)
			version := s.Version()
			if r, ok := NewRemovalSimulator(c, s, defaultDrain).ReplayNodeRemoval(first, tc.dest, nil, now); ok {
				t.Fatalf("replayed %+v, want refused", r)
			}
			if s.Version() != version || !s.HasNode("n1") || s.ForkDepth() != 0 {
				t.Fatalf("a refused replay changed the snapshot")
			}
		})
	}
}

func withVersion(p *apiv1.Pod, rv string) *apiv1.Pod {
	p.ResourceVersion = rv
	return p
}

// Removals chained in one simulation hold no copies of the pods they move:
// each destination holds the pod object itself (the informer's, still
// naming the node it left), so the memo that keeps removals for the next
// loop's replays keeps no pods of its own. (Holding one unbound copy a
// moved pod cost 0.6 MB at 1,000 nodes.)
func TestChainedRemovalsHoldNoPodCopies(t *testing.T) {
	c := testChecker(t)
	now := time.Now()
	nodes := []*apiv1.Node{Node("n1", 2000, 4*GiB), Node("n2", 2000, 4*GiB), Node("n3", 2000, 4*GiB)}
	pods := []*apiv1.Pod{rsPod("a", 300, "n1"), rsPod("b", 300, "n1"), rsPod("c", 300, "n2")}
	s := snapshotOf(t, nodes, pods)
	r := NewRemovalSimulator(c, s, defaultDrain)
	first, bad := r.SimulateNodeRemoval("n1", map[string]bool{"n2": true}, nil, now)
	if bad != nil {
		t.Fatal(bad)
	}
	second, bad := r.SimulateNodeRemoval("n2", map[string]bool{"n3": true}, nil, now)
	if bad != nil {
		t.Fatal(bad)
	}
	if len(second.PodsToReschedule) != 3 || requestedCPU(t, s, "n3") != 900 {
		t.Fatalf("n2's removal moved %d pods, n3 requests %dm; want a, b and c on n3 (900m)",
			len(second.PodsToReschedule), requestedCPU(t, s, "n3"))
	}
	informers := map[*apiv1.Pod]bool{pods[0]: true, pods[1]: true, pods[2]: true}
	for _, r := range []*NodeToBeRemoved{first, second} {
		for i, p := range r.placed {
			if !informers[p] || r.PodsToReschedule[i] != p {
				t.Errorf("%s's removal placed a copy of %s, want the informer's object", r.Node.Name, p.Name)
			}
		}
	}
	for _, pi := range s.nodes["n3"].Pods {
		if !informers[pi.GetPod()] {
			t.Errorf("n3 holds a copy of %s, want the informer's object", pi.GetPod().Name)
		}
	}
	if pods[0].Spec.NodeName != "n1" || pods[2].Spec.NodeName != "n2" {
		t.Errorf("the informer's pods changed: a on %q, c on %q", pods[0].Spec.NodeName, pods[2].Spec.NodeName)
	}
}

// The hint cache keeps what the last two loops hashed: a cluster whose pods
// come and go does not accumulate the pods that left.
func TestHintHashesKeepTwoPasses(t *testing.T) {
	c := testChecker(t)
	now := time.Now()
	nodes := []*apiv1.Node{Node("n1", 2000, 4*GiB), Node("n2", 2000, 4*GiB)}
	pass := func(pod string) {
		t.Helper()
		p := rsPod(pod, 300, "n1")
		p.UID, p.ResourceVersion = types.UID(pod), "1" // as the informer's pods
		s := snapshotOf(t, nodes, []*apiv1.Pod{p})
		c.TurnHints() // a loop
		r := NewRemovalSimulator(c, s, defaultDrain)
		for range 3 { // the same pod simulated more than once in a loop (consolidation's checks)
			s.Fork()
			if _, bad := r.SimulateNodeRemoval("n1", nil, nil, now); bad != nil {
				t.Fatal(bad)
			}
			s.Revert()
		}
	}
	cached := func() int { // distinct pods in either generation
		ids := map[hintID]bool{}
		for id := range c.hints.cur {
			ids[id] = true
		}
		for id := range c.hints.prev {
			ids[id] = true
		}
		return len(ids)
	}
	for i := range 50 {
		pass(fmt.Sprintf("gone-%d", i)) // a new pod each pass, as under churn
	}
	if got := cached(); got != 2 {
		t.Errorf("after 50 loops each moving a new pod the cache holds %d hashes, want the last two loops' 2", got)
	}
	// A pod moved every loop keeps its entry across any number of loops.
	for range 3 {
		pass("stays")
	}
	if _, ok := c.hints.cur[hintID{uid: types.UID("stays"), rv: "1"}]; !ok {
		t.Errorf("the pod moved every loop has no hash in the current loop's generation: %v", c.hints.cur)
	}
	if got := cached(); got != 1 {
		t.Errorf("after loops moving one pod the cache holds %d hashes, want 1", got)
	}
}
