package report

import (
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
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

// At the account's droplet limit the status ConfigMap says Reached and one
// DropletQuotaReached event is recorded in the loop that sees it, not again
// while it stays reached.
func TestDropletQuotaReachedIsShownAndEvented(t *testing.T) {
	f := newFixture(t, map[string]int{"g": 5})
	q := &cloudprovider.InstanceQuota{Limit: 25, Instances: 24, Headroom: 1, ReadAt: t0}
	f.r.State(resourcequotas.Limits{Instances: q}, t0)
	st := f.registry.GetStatus(t0).Limits
	if st == nil || st.DropletQuota == nil || st.DropletQuota.Status != DropletQuotaAvailable || st.DropletQuota.Droplets != 24 {
		t.Fatalf("status limits = %+v, want the quota Available with 24 droplets", st)
	}
	if ev := f.drain(); len(ev) != 0 {
		t.Fatalf("events %v below the limit", ev)
	}
	q = &cloudprovider.InstanceQuota{Limit: 25, Instances: 25, Headroom: 0, ReadAt: t0}
	f.r.State(resourcequotas.Limits{Instances: q}, t0.Add(time.Minute))
	f.r.State(resourcequotas.Limits{Instances: q}, t0.Add(2*time.Minute))
	st = f.registry.GetStatus(t0).Limits
	if st.DropletQuota.Status != DropletQuotaReached || st.DropletQuota.LastTransitionTime != t0.Add(time.Minute).UTC().Format(time.RFC3339) {
		t.Fatalf("status = %+v, want Reached since the first loop that saw it", st.DropletQuota)
	}
	ev := f.drain()
	if len(ev) != 1 || !strings.Contains(ev[0], "Warning DropletQuotaReached The account has 25 droplets of its droplet limit 25") {
		t.Fatalf("events %v, want one DropletQuotaReached", ev)
	}
	f.r.State(resourcequotas.Limits{}, t0)
	if st := f.registry.GetStatus(t0).Limits; st != nil {
		t.Fatalf("quota unknown again: limits %+v, want none", st)
	}
}
