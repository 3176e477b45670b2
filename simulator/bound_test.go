package simulator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	apiv1 "k8s.io/api/core/v1"

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
		want    int
	}{
		{"no pods", nil, nil, 0},
		{"by cpu: 500m free on n1, 2000m on n2", pods(500, MiB, 10), nil, 5},
		{"by memory: 3 GiB free on n1, 4 on n2, 1 MiB short of 4 on n3", pods(0, 2*GiB, 10), nil, 1 + 2 + 1},
		{"fewer pods than room", pods(100, MiB, 3), nil, 3},
		{"n2 excluded", pods(500, MiB, 10), map[string]bool{"n2": true}, 1},
		{"no request: pod slots bound it", pods(0, 0, 400), nil, 3*110 - 2},
		{"the smallest request bounds a mix", append(pods(1000, MiB, 2), pods(250, MiB, 10)...), nil, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := snapshotOf(t, nodes, used)
			if got := s.PlacementBound(c.pods, c.exclude); got != c.want {
				t.Errorf("bound %d, want %d", got, c.want)
			}
		})
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
		s := snapshotOf(t, nodes, used)
		var pods []*apiv1.Pod
		for i := range 1 + rng.IntN(8) {
			pods = append(pods, Pod(fmt.Sprintf("p%d", i), int64(rng.IntN(6))*100, int64(rng.IntN(5))*256*MiB))
		}
		bound := s.PlacementBound(pods, nil)
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
