package consolidation

import (
	"fmt"
	"math/rand/v2"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// With a limit, the candidates are the first of the whole order, each with
// the pods it would move, and the total counts them all: in random
// clusters (pods per node and prices drawn from few values, so ties are
// broken by name), whatever order the nodes are listed in.
func TestCandidatesLimitKeepsTheFirstOfTheOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 44))
	for scenario := 0; scenario < 500; scenario++ {
		var nodes []*apiv1.Node
		byNode := map[string][]*apiv1.Pod{}
		prices := map[string]float64{}
		for i := range 1 + rng.IntN(60) {
			n := test.BuildNode(fmt.Sprintf("n%02d", i), 4000, 8*test.GiB)
			nodes = append(nodes, n)
			prices[n.Name] = float64(1 + rng.IntN(3))
			for j := range rng.IntN(4) {
				byNode[n.Name] = append(byNode[n.Name], test.BuildScheduledPod(fmt.Sprintf("p%d-%d", i, j), 100, test.MiB, "rs", n.Name))
			}
			if rng.IntN(4) == 0 {
				byNode[n.Name] = append(byNode[n.Name], test.BuildDaemonSetPod(fmt.Sprintf("ds%d", i), 100, test.MiB, "ds", n.Name))
			}
		}
		in := func(listed []*apiv1.Node, limit int) CandidateInput {
			return CandidateInput{
				Nodes: listed, PodsByNode: byNode, Limit: limit,
				GroupOf: func(string) (Group, bool) { return Group{ID: "g", Consolidate: true}, true },
				Ready:   func(*apiv1.Node) bool { return true },
				Price:   func(n *apiv1.Node) (float64, error) { return prices[n.Name], nil },
			}
		}
		all, _, total := Candidates(in(nodes, 0))
		if total != len(all) || total != len(nodes) {
			t.Fatalf("scenario %d: %d candidates, total %d, of %d nodes", scenario, len(all), total, len(nodes))
		}
		shuffled := append([]*apiv1.Node(nil), nodes...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		limit := 1 + rng.IntN(25)
		first, _, total := Candidates(in(shuffled, limit))
		if total != len(all) || len(first) != min(limit, len(all)) {
			t.Fatalf("scenario %d: limit %d gave %d candidates, total %d; want %d, %d", scenario, limit, len(first), total, min(limit, len(all)), len(all))
		}
		for i, c := range first {
			if c.Node.Name != all[i].Node.Name || len(c.Moving) != c.Pods || c.Pods != all[i].Pods {
				t.Fatalf("scenario %d: candidate %d is %s moving %d (counted %d), want %s moving %d", scenario, i, c.Node.Name, len(c.Moving), c.Pods, all[i].Node.Name, all[i].Pods)
			}
		}
		for i := 1; i < len(all); i++ {
			if compareCandidates(all[i-1], all[i]) >= 0 {
				t.Fatalf("scenario %d: candidates %s and %s out of order", scenario, all[i-1].Node.Name, all[i].Node.Name)
			}
		}
	}
}
