package simulator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

func TestPlacementBound(t *testing.T) {
	// n1: 2000m, 4 GiB, 1500m and 1 GiB used; n2: empty; n3: full by cpu.
	nodes := []*apiv1.Node{Node("n1", 2000, 4*GiB), Node("n2", 2000, 4*GiB), Node("n3", 1000, 4*GiB)}
	used := []*apiv1.Pod{BoundPod("u1", 1500, GiB, "n1"), BoundPod("u3", 1000, MiB, "n3")}
	pods := func(cpu, mem int64, n int) []*apiv1.Pod {
		out := make([]*apiv1.Pod, n)
		for i := range out {
			out[i] = Pod(fmt.Sprintf("p%d", i), cpu, mem)
		}
		return out
	}
	cases := []struct {
		name    string
		pods    []*apiv1.Pod
		exclude map[string]bool
		extra   []*framework.NodeInfo
		want    int
	}{
		{"no pods", nil, nil, nil, 0},
		{"by cpu: 500m free on n1, 2000m on n2", pods(500, MiB, 10), nil, nil, 5},
		{"by memory: 3 GiB free on n1, 4 on n2, 1 MiB short of 4 on n3", pods(0, 2*GiB, 10), nil, nil, 1 + 2 + 1},
		{"fewer pods than room", pods(100, MiB, 3), nil, nil, 3},
		{"n2 excluded", pods(500, MiB, 10), map[string]bool{"n2": true}, nil, 1},
		{"no request: pod slots bound it", pods(0, 0, 400), nil, nil, 3*110 - 2},
		{"the smallest request bounds a mix", append(pods(1000, MiB, 2), pods(250, MiB, 10)...), nil, nil, 10},
		{"a replacement's room counts, less its DaemonSet pods", pods(500, MiB, 10), map[string]bool{"n2": true},
			[]*framework.NodeInfo{framework.NewNodeInfo(Node("r", 2000, 4*GiB), BoundPod("ds", 500, MiB, "r"))}, 1 + 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := snapshotOf(t, nodes, used)
			if got := s.PlacementBound(c.pods, c.exclude, c.extra...); got != c.want {
				t.Errorf("bound %d, want %d", got, c.want)
			}
		})
	}
}

// The sum over every node is kept per snapshot content: a pod added or
// removed, or a fork reverted, gives the bound of what the snapshot then
// holds.
func TestPlacementBoundFollowsTheSnapshot(t *testing.T) {
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 2000, 4*GiB), Node("n2", 2000, 4*GiB)}, nil)
	moving := []*apiv1.Pod{Pod("a", 500, MiB), Pod("b", 500, MiB), Pod("c", 500, MiB), Pod("d", 500, MiB),
		Pod("e", 500, MiB), Pod("f", 500, MiB), Pod("g", 500, MiB), Pod("h", 500, MiB), Pod("i", 500, MiB)}
	bound := func() int { return s.PlacementBound(moving, nil) }
	if got := bound(); got != 8 {
		t.Fatalf("empty nodes: bound %d, want 8", got)
	}
	s.Fork()
	if err := s.AddPod(BoundPod("x", 1500, MiB, "n1"), "n1"); err != nil {
		t.Fatal(err)
	}
	if got := bound(); got != 5 {
		t.Fatalf("after a pod took 1500m: bound %d, want 5", got)
	}
	s.Revert()
	if got := bound(); got != 8 {
		t.Fatalf("after the fork was reverted: bound %d, want 8", got)
	}
	if err := s.RemoveNode("n2"); err != nil {
		t.Fatal(err)
	}
	if got := bound(); got != 4 {
		t.Fatalf("after n2 was removed: bound %d, want 4", got)
	}
}

// The bound is only ever a reason to skip a simulation: whenever the
// scheduler's own filters place every pod, the bound allows them all.
func TestPlacementBoundNeverRefusesAPlacement(t *testing.T) {
	c := testChecker(t)
	rng := rand.New(rand.NewPCG(44, 1))
	placed := 0
	for scenario := 0; scenario < 2000; scenario++ {
		var nodes []*apiv1.Node
		var used []*apiv1.Pod
		for i := range 1 + rng.IntN(6) {
			name := fmt.Sprintf("n%d", i)
			nodes = append(nodes, Node(name, int64(500+rng.IntN(4)*500), int64(1+rng.IntN(4))*GiB))
			for j := range rng.IntN(3) {
				used = append(used, BoundPod(fmt.Sprintf("u%d-%d", i, j), int64(rng.IntN(800)), int64(rng.IntN(1024))*MiB, name))
			}
		}
		// Half the time the last node is a replacement: outside the
		// snapshot for the bound (extra), added before the scheduler
		// places the pods.
		var extra []*framework.NodeInfo
		if rng.IntN(2) == 0 {
			last := nodes[len(nodes)-1]
			ni := framework.NewNodeInfo(last)
			var rest []*apiv1.Pod
			for _, p := range used {
				if p.Spec.NodeName == last.Name {
					ni.AddPod(p)
				} else {
					rest = append(rest, p)
				}
			}
			nodes, used, extra = nodes[:len(nodes)-1], rest, []*framework.NodeInfo{ni}
		}
		s := snapshotOf(t, nodes, used)
		// The requests of a pod in the snapshot are its PodInfo's, as
		// the scheduler computed them: the same as its spec's.
		for _, p := range used {
			cpu, mem := s.podRequests(p)
			r := framework.PodRequests(p)
			if cpu != r.Cpu().MilliValue() || mem != r.Memory().Value() {
				t.Fatalf("scenario %d: pod %s: requests %dm %d from the snapshot, %s %s from its spec", scenario, p.Name, cpu, mem, r.Cpu(), r.Memory())
			}
		}
		var pods []*apiv1.Pod
		for i := range 1 + rng.IntN(8) {
			pods = append(pods, Pod(fmt.Sprintf("p%d", i), int64(rng.IntN(6))*100, int64(rng.IntN(5))*256*MiB))
		}
		bound := s.PlacementBound(pods, nil, extra...)
		for _, ni := range extra {
			if err := s.AddNodeInfo(ni); err != nil {
				t.Fatal(err)
			}
		}
		all := true
		for _, p := range pods {
			name, err := c.FitsAnyNodeMatching(s, p, nil)
			if err != nil {
				all = false
				break
			}
			if err := s.AddPod(p, name); err != nil {
				t.Fatal(err)
			}
		}
		if all {
			placed++
			if bound < len(pods) {
				t.Fatalf("scenario %d: the scheduler placed all %d pods, the bound allowed %d", scenario, len(pods), bound)
			}
		}
	}
	if placed < 200 {
		t.Fatalf("only %d of 2000 scenarios placed every pod: the test proves little", placed)
	}
}
