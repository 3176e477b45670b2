package statemetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// gauge returns the value of the cluster_autoscaler_<name> series whose
// label key is value (key "" for a series without labels), and whether it
// exists.
func gauge(t *testing.T, reg *prometheus.Registry, name, key, value string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cluster_autoscaler_"+name {
			continue
		}
		for _, m := range mf.GetMetric() {
			label := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == key {
					label = lp.GetValue()
				}
			}
			if label == value {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func registryOf(t *testing.T, groups map[string]int, now time.Time) *clusterstate.Registry {
	t.Helper()
	p := test.NewProvider()
	for id, maxSize := range groups {
		p.AddNodeGroup(id, 0, maxSize, 0, test.BuildTemplate(id, 1000, test.GiB, nil))
	}
	r := clusterstate.NewRegistry(p, config.Defaults())
	if err := r.UpdateNodes(nil, now); err != nil {
		t.Fatal(err)
	}
	return r
}

// A node group the provider no longer lists loses its per-group series;
// the group count and the cluster's maximum follow.
func TestReportDropsVanishedGroups(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.RegisterAll(reg, true)
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	rep := NewReporter(0)

	rep.Report(registryOf(t, map[string]int{"g1": 5, "g2": 3}, now), now)
	if _, ok := gauge(t, reg, "node_group_max_count", "node_group", "g2"); !ok {
		t.Fatal("no node_group_max_count series for g2")
	}
	if v, _ := gauge(t, reg, "max_nodes_count", "", ""); v != 8 {
		t.Fatalf("max_nodes_count = %v, want 8", v)
	}

	rep.Report(registryOf(t, map[string]int{"g1": 5}, now), now)
	if _, ok := gauge(t, reg, "node_group_max_count", "node_group", "g2"); ok {
		t.Error("node_group_max_count still has a series for the vanished g2")
	}
	if v, ok := gauge(t, reg, "node_group_max_count", "node_group", "g1"); !ok || v != 5 {
		t.Errorf("node_group_max_count{g1} = %v (%v), want 5", v, ok)
	}
	if v, _ := gauge(t, reg, "node_groups_count", "node_group_type", "autoscaled"); v != 1 {
		t.Errorf("node_groups_count = %v, want 1", v)
	}
	if v, _ := gauge(t, reg, "max_nodes_count", "", ""); v != 5 {
		t.Errorf("max_nodes_count = %v, want 5", v)
	}
}
