package scaleup

import (
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// moneyPlan plans a scale-up of pods (1000m each) on one group "a" whose
// nodes have 1000m and cost $0.50/h (target, max 10), under
// --max-hourly-cost maxHourly and the group's own limit groupMax.
func moneyPlan(t *testing.T, pods, target int, maxHourly, groupMax float64) *Plan {
	t.Helper()
	checker, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	p := test.NewProvider()
	pm := &test.PricingModel{PerCoreHour: 0.5}
	p.SetPricing(pm)
	tmpl := test.BuildTemplate("a", 1000, 4*test.GiB, nil)
	g := p.AddNodeGroup("a", 0, 10, target, tmpl)
	g.SetMaxHourlyCost(groupMax)
	opts := config.Defaults()
	now := time.Now()
	registry := clusterstate.NewRegistry(p, opts)
	if err := registry.UpdateNodes(nil, now); err != nil {
		t.Fatal(err)
	}
	var in []*apiv1.Pod
	for i := range pods {
		pod := test.BuildPendingPod("p"+string(rune('0'+i)), 1000, 1<<20, "rs")
		pod.UID = types.UID(pod.Name)
		in = append(in, pod)
	}
	limits := resourcequotas.Limits{Money: resourcequotas.NewMoney(maxHourly, pm, func(*apiv1.Node) bool { return true })}
	quotas := resourcequotas.NewTracker(limits, nil, nil)
	// The group's target nodes count as upcoming (none registered).
	o := New(opts, p, registry, nil, checker, &countingRecorder{})
	return o.computePlan(Input{Snapshot: simulator.NewClusterSnapshot(), Pods: in,
		Templates: map[string]*framework.NodeInfo{"a": tmpl}, Now: now, Quotas: quotas})
}

func reasonsOf(plan *Plan) string {
	var out []string
	for _, nh := range plan.NotHelped {
		out = append(out, ReasonSummary(nh.Reasons))
	}
	return strings.Join(out, "; ")
}

// --max-hourly-cost bounds an existing group's increase; at the limit the
// pods are told the limit and the figures.
func TestMaxHourlyCostBoundsScaleUp(t *testing.T) {
	plan := moneyPlan(t, 5, 1, 2.0, 0) // $0.50/h in use: 3 more fit
	if got := plan.Increases["a"]; len(got) != 1 || got[0].To != 4 {
		t.Fatalf("increases = %v, want a to 4 ($2.00/h)", plan.Increases)
	}
	plan = moneyPlan(t, 2, 2, 1.2, 0) // $1.00/h in use: none fits
	if len(plan.Increases) != 0 {
		t.Fatalf("increases = %v, want none", plan.Increases)
	}
	want := "max hourly cost reached: $1.0000/h of --max-hourly-cost $1.2000/h in use, a node costs $0.5000/h"
	if r := reasonsOf(plan); !strings.Contains(r, want) {
		t.Fatalf("NotTriggerScaleUp reasons = %q, want %q", r, want)
	}
	if len(plan.LimitsHit) != 1 || plan.LimitsHit[0] != resourcequotas.Cost {
		t.Fatalf("limits hit = %v, want the hourly cost", plan.LimitsHit)
	}
}

// A group's own hourly limit bounds its increase as a max size would, and
// names itself.
func TestGroupMaxHourlyCostBoundsScaleUp(t *testing.T) {
	plan := moneyPlan(t, 5, 1, 0, 1.5)
	if got := plan.Increases["a"]; len(got) != 1 || got[0].To != 3 {
		t.Fatalf("increases = %v, want a to 3 ($1.50/h)", plan.Increases)
	}
	plan = moneyPlan(t, 1, 3, 0, 1.5)
	want := "node group max hourly cost reached: 3 nodes at $0.5000/h = $1.5000/h of the group's $1.5000/h"
	if r := reasonsOf(plan); len(plan.Increases) != 0 || !strings.Contains(r, want) {
		t.Fatalf("increases %v, reasons %q; want none and %q", plan.Increases, r, want)
	}
	if len(plan.LimitsHit) != 0 {
		t.Fatalf("limits hit = %v: a group's own limit is no cluster-wide one", plan.LimitsHit)
	}
}

// Pools on demand are bought under the same limit.
func TestMaxHourlyCostBoundsNewPools(t *testing.T) {
	machines := []machine{{name: "cpu", milliCPU: 4000, price: 0.5}}
	for _, c := range []struct {
		max  float64
		want bool
	}{{0.4, false}, {0.6, true}} {
		p := test.NewProvider()
		o, in := newGroupScaleUp(t, p, machines, []*apiv1.Pod{test.BuildPendingPod("x", 1000, test.GiB, "rs")})
		pm, _ := p.Pricing()
		in.Quotas = resourcequotas.NewTracker(resourcequotas.Limits{Money: resourcequotas.NewMoney(c.max, pm, nil)}, nil, nil)
		plan := o.computePlan(in)
		if got := len(plan.Options) > 0; got != c.want {
			t.Fatalf("limit $%.2f/h: options %v, want some: %v (reasons %q)", c.max, plan.Options, c.want, reasonsOf(plan))
		}
		if !c.want && !strings.Contains(reasonsOf(plan), "max hourly cost reached") {
			t.Fatalf("reasons = %q, want the hourly cost named", reasonsOf(plan))
		}
	}
}

// Raising a group to its min size stays within the money limits too.
func TestMinSizeRaiseStaysUnderMaxHourlyCost(t *testing.T) {
	checker, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	p := test.NewProvider()
	pm := &test.PricingModel{PerCoreHour: 0.5}
	p.SetPricing(pm)
	tmpl := test.BuildTemplate("a", 1000, 4*test.GiB, nil)
	p.AddNodeGroup("a", 5, 10, 0, tmpl)
	opts := config.Defaults()
	now := time.Now()
	registry := clusterstate.NewRegistry(p, opts)
	if err := registry.UpdateNodes(nil, now); err != nil {
		t.Fatal(err)
	}
	o := New(opts, p, registry, nil, checker, &countingRecorder{})
	quotas := resourcequotas.NewTracker(resourcequotas.Limits{Money: resourcequotas.NewMoney(1.6, pm, nil)}, nil, nil)
	plan, skipped := o.planner.planMinSize(registry.NodeGroups(), map[string]*framework.NodeInfo{"a": tmpl}, quotas, now)
	if len(plan) != 1 || plan[0].To != 3 || len(skipped) != 0 {
		t.Fatalf("plan %v, skipped %v; want a raised to 3 ($1.50/h of $1.60/h)", plan, skipped)
	}
}

// At the account's droplet limit no option asks for a droplet: the pods
// are told the limit and the figures; with 2 left the increase stops at 2.
func TestInstanceQuotaBoundsScaleUp(t *testing.T) {
	checker, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		headroom, wantTo int
	}{{0, 0}, {2, 2}} {
		p := test.NewProvider()
		tmpl := test.BuildTemplate("a", 1000, 4*test.GiB, nil)
		p.AddNodeGroup("a", 0, 10, 0, tmpl)
		opts := config.Defaults()
		now := time.Now()
		registry := clusterstate.NewRegistry(p, opts)
		if err := registry.UpdateNodes(nil, now); err != nil {
			t.Fatal(err)
		}
		var pods []*apiv1.Pod
		for i := range 5 {
			pod := test.BuildPendingPod("p"+string(rune('0'+i)), 1000, 1<<20, "rs")
			pod.UID = types.UID(pod.Name)
			pods = append(pods, pod)
		}
		q := &cloudprovider.InstanceQuota{Limit: 25, Instances: 25 - c.headroom, Headroom: c.headroom, ReadAt: now}
		o := New(opts, p, registry, nil, checker, &countingRecorder{})
		plan := o.computePlan(Input{Snapshot: simulator.NewClusterSnapshot(), Pods: pods, Templates: map[string]*framework.NodeInfo{"a": tmpl},
			Now: now, Quotas: resourcequotas.NewTracker(resourcequotas.Limits{Instances: q}, nil, nil)})
		got := 0
		if inc := plan.Increases["a"]; len(inc) == 1 {
			got = inc[0].To
		}
		if got != c.wantTo {
			t.Fatalf("headroom %d: increases %v, want a to %d", c.headroom, plan.Increases, c.wantTo)
		}
		if c.headroom == 0 && !strings.Contains(reasonsOf(plan), "account droplet limit reached: 25 droplets of DigitalOcean's droplet_limit 25") {
			t.Fatalf("reasons %q, want the droplet limit named", reasonsOf(plan))
		}
	}
}
