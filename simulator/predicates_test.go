package simulator

import (
	"strings"
	"sync"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

var (
	checkerOnce sync.Once
	checker     *PredicateChecker
	checkerErr  error
)

// testChecker shares one framework between tests: building it costs
// milliseconds, and it keeps no state between calls.
func testChecker(t testing.TB) *PredicateChecker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = NewPredicateChecker() })
	if checkerErr != nil {
		t.Fatalf("NewPredicateChecker: %v", checkerErr)
	}
	return checker
}

func snapshotOf(t testing.TB, nodes []*apiv1.Node, pods []*apiv1.Pod) *ClusterSnapshot {
	t.Helper()
	s := NewClusterSnapshot()
	if err := s.SetClusterState(nodes, pods); err != nil {
		t.Fatalf("SetClusterState: %v", err)
	}
	return s
}

func TestCheckPredicatesResources(t *testing.T) {
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 2000, 4*GiB)}, []*apiv1.Pod{BoundPod("running", 1500, GiB, "n1")})

	if err := c.CheckPredicates(s, Pod("small", 500, GiB), "n1"); err != nil {
		t.Errorf("pod using the remaining 0.5 cpu should fit: %v", err)
	}
	err := c.CheckPredicates(s, Pod("big", 600, GiB), "n1")
	if err == nil {
		t.Fatalf("pod asking 0.6 cpu with 0.5 free should not fit")
	}
	if err.PluginName() != "NodeResourcesFit" {
		t.Errorf("plugin = %q, want NodeResourcesFit", err.PluginName())
	}
	if !strings.Contains(strings.Join(err.Reasons(), ","), "Insufficient cpu") {
		t.Errorf("reasons = %v, want Insufficient cpu", err.Reasons())
	}
	if err := c.CheckPredicates(s, Pod("x", 1, 1), "missing"); err == nil {
		t.Errorf("a node that is not in the snapshot must not fit")
	}
}
