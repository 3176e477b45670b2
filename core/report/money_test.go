package report

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
)

// Each group's hourly cost (target × price), the total and the limit are
// gauges and the status ConfigMap's limits section; without pricing the
// section is absent.
func TestStateExportsSpendAndLimit(t *testing.T) {
	f := newFixture(t, nil)
	pm := &test.PricingModel{PerCoreHour: 0.25}
	f.p.SetPricing(pm)
	f.p.AddNodeGroup("a", 0, 10, 3, test.BuildTemplate("a", 2000, test.GiB, nil)) // $0.50/h each
	f.p.AddNodeGroup("b", 0, 10, 1, test.BuildTemplate("b", 4000, test.GiB, nil)) // $1.00/h
	f.registry = clusterstate.NewRegistry(f.p, config.Defaults())
	if err := f.registry.UpdateNodes(nil, t0); err != nil {
		t.Fatal(err)
	}
	f.r.registry = f.registry
	limits := resourcequotas.Limits{Money: resourcequotas.NewMoney(3, pm, func(*apiv1.Node) bool { return true })}
	f.r.State(limits, t0)
	if v, _ := f.value(t, "hourly_cost_total", nil); v != 2.5 {
		t.Errorf("hourly_cost_total = %v, want 2.5", v)
	}
	if v, _ := f.value(t, "hourly_cost_node_group", map[string]string{"node_group": "a"}); v != 1.5 {
		t.Errorf("hourly_cost_node_group{a} = %v, want 1.5", v)
	}
	if v, _ := f.value(t, "hourly_cost_limit", nil); v != 3 {
		t.Errorf("hourly_cost_limit = %v, want 3", v)
	}
	st := f.registry.GetStatus(t0).Limits
	if st == nil || st.HourlyCost != "2.5000" || st.MaxHourlyCost != "3.0000" {
		t.Fatalf("status limits = %+v, want spend 2.5000 of 3.0000", st)
	}
	f.r.State(resourcequotas.Limits{}, t0)
	if st := f.registry.GetStatus(t0).Limits; st != nil {
		t.Fatalf("status limits without pricing = %+v, want none", st)
	}
}
