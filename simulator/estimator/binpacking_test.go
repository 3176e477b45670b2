package estimator

import (
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

var (
	checkerOnce sync.Once
	checker     *simulator.PredicateChecker
	checkerErr  error
)

func testChecker(t testing.TB) *simulator.PredicateChecker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = simulator.NewPredicateChecker() })
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checker
}

// template returns a 4-cpu / 8 GiB pool template with a DaemonSet pod of
// dsMilliCPU added the way the core does it.
func template(t testing.TB, c *simulator.PredicateChecker, dsMilliCPU int64) *framework.NodeInfo {
	t.Helper()
	base := framework.NewNodeInfo(WithLabel(Node("pool-a", 4000, 8*GiB), apiv1.LabelTopologyZone, "a"))
	var dss []*appsv1.DaemonSet
	if dsMilliCPU > 0 {
		dss = append(dss, DaemonSet("agent", dsMilliCPU, 64*MiB))
	}
	ni, err := simulator.SanitizedTemplateNodeInfo(base, "template", dss, c)
	if err != nil {
		t.Fatal(err)
	}
	return ni
}

func cluster(t testing.TB, nodes []*apiv1.Node, pods []*apiv1.Pod) *simulator.ClusterSnapshot {
	t.Helper()
	s := simulator.NewClusterSnapshot()
	if err := s.SetClusterState(nodes, pods); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEstimate(t *testing.T) {
	c := testChecker(t)
	antiAffine := ReplicaSetPods("db", 5, 100, MiB)
	for _, p := range antiAffine {
		WithAntiAffinity(p, apiv1.LabelHostname)
	}
	wrongPool := ReplicaSetPods("gpu", 3, 100, MiB)
	for _, p := range wrongPool {
		p.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	}
	mixed := append(ReplicaSetPods("small", 6, 500, MiB), ReplicaSetPods("large", 2, 3000, MiB)...)

	tests := []struct {
		name       string
		pods       []*apiv1.Pod
		dsCPU      int64
		maxNodes   int
		wantNodes  int
		wantPlaced int
	}{
		// 3.5 cpu free per node: 3 pods each, so 10 pods need 4 nodes.
		{name: "DaemonSet occupies each node", pods: ReplicaSetPods("web", 10, 1000, MiB), dsCPU: 500, maxNodes: 100, wantNodes: 4, wantPlaced: 10},
		{name: "without DaemonSet", pods: ReplicaSetPods("web", 10, 1000, MiB), maxNodes: 100, wantNodes: 3, wantPlaced: 10},
		{name: "anti-affinity per hostname: one node per pod", pods: antiAffine, maxNodes: 100, wantNodes: 5, wantPlaced: 5},
		{name: "max nodes caps", pods: ReplicaSetPods("web", 10, 1000, MiB), dsCPU: 500, maxNodes: 2, wantNodes: 2, wantPlaced: 6},
		{name: "pod too big for the template", pods: ReplicaSetPods("huge", 4, 5000, MiB), maxNodes: 100, wantNodes: 0, wantPlaced: 0},
		{name: "pod does not select the template", pods: wrongPool, maxNodes: 100, wantNodes: 0, wantPlaced: 0},
		// Large first: two 3-cpu pods open two nodes, the 0.5-cpu pods fill the
		// 1 cpu left on each (4 of them) and open a third node for the last 2.
		{name: "largest pods first", pods: mixed, maxNodes: 100, wantNodes: 3, wantPlaced: 8},
		{name: "zero max nodes", pods: ReplicaSetPods("web", 1, 100, MiB), maxNodes: 0, wantNodes: 0, wantPlaced: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := cluster(t, []*apiv1.Node{Node("existing", 4000, 8*GiB)}, nil)
			e := NewBinpackingEstimator(c, s)
			nodes, placed := e.Estimate(simulator.GroupPods(tc.pods), template(t, c, tc.dsCPU), tc.maxNodes)
			if nodes != tc.wantNodes || len(placed) != tc.wantPlaced {
				t.Errorf("got %d nodes for %d pods, want %d nodes for %d pods", nodes, len(placed), tc.wantNodes, tc.wantPlaced)
			}
			if names := s.NodeNames(); len(names) != 1 || names[0] != "existing" || s.ForkDepth() != 0 {
				t.Errorf("estimation left the snapshot changed: %v (depth %d)", names, s.ForkDepth())
			}
		})
	}
}

func TestEstimateSeesExistingPods(t *testing.T) {
	c := testChecker(t)
	const zone = apiv1.LabelTopologyZone
	// Zone spread over a (template zone) and b (an existing node with 2
	// replicas): with maxSkew 1, zone a may take 3 of them at most.
	existing := WithLabel(Node("b1", 8000, 16*GiB), zone, "b")
	running := ReplicaSetPods("web", 2, 100, MiB)
	for _, p := range running {
		p.Spec.NodeName = "b1"
		p.Status.Phase = apiv1.PodRunning
	}
	pending := ReplicaSetPods("web", 10, 1000, MiB)
	for i, p := range pending {
		p.Name = fmt.Sprintf("web-pending-%d", i)
		WithTopologySpread(p, zone, 1)
	}
	s := cluster(t, []*apiv1.Node{existing}, running)
	e := NewBinpackingEstimator(c, s)
	nodes, placed := e.Estimate(simulator.GroupPods(pending), template(t, c, 0), 100)
	if len(placed) != 3 || nodes != 1 {
		t.Errorf("got %d nodes for %d pods, want 1 node for 3 pods (zone a may lead zone b by one)", nodes, len(placed))
	}
}
