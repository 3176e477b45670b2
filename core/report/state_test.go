package report

import (
	"testing"

	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
)

// A node group the provider no longer lists loses its per-group series;
// the group count and the cluster's maximum (within --max-nodes-total)
// follow.
func TestStateDropsVanishedGroups(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 5, "g2": 3})
	f.r.State(resourcequotas.Limits{MaxNodes: 7}, t0)
	if _, ok := f.value(t, "node_group_max_count", map[string]string{"node_group": "g2"}); !ok {
		t.Fatal("no node_group_max_count series for g2")
	}
	if v, _ := f.value(t, "max_nodes_count", nil); v != 7 {
		t.Fatalf("max_nodes_count = %v, want 7: the maxima add up to 8, --max-nodes-total is 7", v)
	}

	f.r.registry = newFixture(t, map[string]int{"g1": 5}).registry
	f.r.State(resourcequotas.Limits{MaxNodes: 7}, t0)
	if _, ok := f.value(t, "node_group_max_count", map[string]string{"node_group": "g2"}); ok {
		t.Error("node_group_max_count still has a series for the vanished g2")
	}
	if v, ok := f.value(t, "node_group_max_count", map[string]string{"node_group": "g1"}); !ok || v != 5 {
		t.Errorf("node_group_max_count{g1} = %v (%v), want 5", v, ok)
	}
	if v, _ := f.value(t, "node_groups_count", map[string]string{"node_group_type": "autoscaled"}); v != 1 {
		t.Errorf("node_groups_count = %v, want 1", v)
	}
	if v, _ := f.value(t, "max_nodes_count", nil); v != 5 {
		t.Errorf("max_nodes_count = %v, want 5", v)
	}
}
