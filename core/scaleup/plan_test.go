package scaleup

import (
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// planGroup is a node group of a plan test: its template's cpu (millicores,
// 4 GiB memory each), target and max.
type planGroup struct {
	id                  string
	milliCPU            int64
	target, max         int
	noTemplate, backOff bool
	// deleted: the cloud deleted the group after the registry listed it
	// (a pool deleted with its last nodes while the loop runs).
	deleted bool
}

// TestComputePlan checks the decision alone: which groups would grow and
// by how much, and for each pod no group helps, the reasons, with nothing
// asked of the cloud and no event recorded.
func TestComputePlan(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name      string
		balance   bool // --balance-similar-node-groups
		atomic    bool // Input.AllOrNothing
		groups    []planGroup
		pods      int   // pending pods of 1000m each
		podCPU    int64 // 0: 1000m
		limits    resourcequotas.Limits
		want      map[string][]Increase
		notHelped map[Reason]int // reasons of the pods no option helps
		limitsHit []resourcequotas.Resource
		capped    []string
	}{
		{name: "one group grows by what the pods need",
			groups: []planGroup{{id: "a", milliCPU: 2000, max: 10}}, pods: 3,
			want: map[string][]Increase{"a": {{GroupID: "a", From: 0, To: 2, Max: 10}}}},
		{name: "groups that cannot grow give their reasons",
			groups: []planGroup{{id: "full", milliCPU: 2000, target: 2, max: 2}, {id: "none", noTemplate: true, max: 5},
				{id: "off", milliCPU: 2000, max: 5, backOff: true}}, pods: 1,
			want:      map[string][]Increase{},
			notHelped: map[Reason]int{ReasonMaxSize: 1, ReasonNoTemplate: 1, ReasonBackoff: 1}},
		{name: "a group deleted since the registry listed it is no option",
			groups: []planGroup{{id: "gone", milliCPU: 2000, max: 10, deleted: true}, {id: "a", milliCPU: 1000, max: 10}}, pods: 1,
			want: map[string][]Increase{"a": {{GroupID: "a", From: 0, To: 1, Max: 10}}}},
		{name: "a pod too large for every template gets the scheduler's reason",
			groups: []planGroup{{id: "a", milliCPU: 2000, max: 10}}, pods: 1, podCPU: 3000,
			want: map[string][]Increase{}, notHelped: map[Reason]int{"Insufficient cpu": 1}},
		{name: "the cpu limit leaves no room",
			groups: []planGroup{{id: "a", milliCPU: 2000, max: 10}}, pods: 2, limits: resourcequotas.Limits{MaxMilliCPU: 1000},
			want: map[string][]Increase{}, notHelped: map[Reason]int{ReasonMaxCores: 1}, limitsHit: []resourcequotas.Resource{resourcequotas.CPU}},
		{name: "--max-nodes-total bounds the estimate",
			groups: []planGroup{{id: "a", milliCPU: 1000, max: 10}}, pods: 5, limits: resourcequotas.Limits{MaxNodes: 2},
			want: map[string][]Increase{"a": {{GroupID: "a", From: 0, To: 2, Max: 10}}}, capped: []string{"a"}},
		{name: "--balance-similar-node-groups spreads the option over similar groups",
			balance: true,
			groups:  []planGroup{{id: "a", milliCPU: 1000, target: 1, max: 10}, {id: "b", milliCPU: 1000, max: 10}}, pods: 3,
			want: map[string][]Increase{
				"a": {{GroupID: "a", From: 1, To: 2, Max: 10}, {GroupID: "b", From: 0, To: 2, Max: 10}},
				"b": {{GroupID: "a", From: 1, To: 2, Max: 10}, {GroupID: "b", From: 0, To: 2, Max: 10}},
			}},
		{name: "all-or-nothing: a group that cannot host every pod is no option",
			atomic: true, groups: []planGroup{{id: "a", milliCPU: 1000, max: 2}}, pods: 3,
			want: map[string][]Increase{}, notHelped: map[Reason]int{ReasonNotAll: 1}},
		{name: "all-or-nothing: one group, not balanced over similar ones",
			atomic: true, balance: true,
			groups: []planGroup{{id: "a", milliCPU: 1000, max: 10}, {id: "b", milliCPU: 1000, max: 10}}, pods: 3,
			want: map[string][]Increase{
				"a": {{GroupID: "a", From: 0, To: 3, Max: 10}},
				"b": {{GroupID: "b", From: 0, To: 3, Max: 10}},
			}},
	}
	checker, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := test.NewProvider()
			templates := map[string]*framework.NodeInfo{}
			var backOff []*test.NodeGroup
			for _, g := range c.groups {
				var tmpl *framework.NodeInfo
				if !g.noTemplate {
					tmpl = test.BuildTemplate(g.id, g.milliCPU, 4*gib, nil)
					templates[g.id] = tmpl
				}
				ng := p.AddNodeGroup(g.id, 0, g.max, g.target, tmpl)
				if g.backOff {
					backOff = append(backOff, ng)
				}
			}
			opts := config.Defaults()
			opts.BalanceSimilarNodeGroups = c.balance
			registry := clusterstate.NewRegistry(p, opts)
			if err := registry.UpdateNodes(nil, now); err != nil {
				t.Fatal(err)
			}
			for _, g := range backOff {
				registry.RegisterFailedScaleUp(g, "cloudProviderError", clusterstate.BackoffInfo{ErrorCode: "x"}, now)
			}
			for _, g := range c.groups {
				if g.deleted {
					ng := p.Group(g.id)
					ng.GoesWithLastNodes()
					if err := ng.DeleteNodes(nil); err != nil || ng.Exist() {
						t.Fatalf("deleting group %s: %v (exists %v)", g.id, err, ng.Exist())
					}
				}
			}
			p.ResetCalls()
			recorder := &countingRecorder{}
			o := New(opts, p, registry, nil, checker, recorder)
			podCPU := c.podCPU
			if podCPU == 0 {
				podCPU = 1000
			}
			var pods []*apiv1.Pod
			for i := range c.pods {
				pod := test.BuildPendingPod("p"+string(rune('0'+i)), podCPU, 1<<20, "rs")
				pod.UID = types.UID(pod.Name)
				pods = append(pods, pod)
			}
			snap := simulator.NewClusterSnapshot()
			plan := o.computePlan(Input{Snapshot: snap, Pods: pods, Templates: templates, Now: now,
				Quotas: resourcequotas.NewTracker(c.limits, nil, nil), AllOrNothing: c.atomic})
			if plan.AllOrNothing != c.atomic {
				t.Errorf("plan.AllOrNothing = %v, want %v", plan.AllOrNothing, c.atomic)
			}

			if !reflect.DeepEqual(plan.Increases, c.want) {
				t.Errorf("increases = %v, want %v", plan.Increases, c.want)
			}
			var reasons map[Reason]int
			if len(plan.NotHelped) > 0 {
				reasons = plan.NotHelped[0].Reasons
			}
			if len(c.notHelped) > 0 && !reflect.DeepEqual(reasons, c.notHelped) {
				t.Errorf("not helped reasons = %v, want %v", reasons, c.notHelped)
			}
			if len(c.notHelped) == 0 && len(plan.NotHelped) > 0 {
				t.Errorf("pods not helped: %v", reasons)
			}
			if !reflect.DeepEqual(plan.LimitsHit, c.limitsHit) {
				t.Errorf("limits hit = %v, want %v", plan.LimitsHit, c.limitsHit)
			}
			for _, id := range c.capped {
				if !plan.CappedByMaxNodes[id] {
					t.Errorf("group %s not capped by --max-nodes-total: %v", id, plan.CappedByMaxNodes)
				}
			}
			if calls := p.Calls(); len(calls) > 0 {
				t.Errorf("planning called the provider: %v", calls)
			}
			if recorder.scaleUps+recorder.minSizes > 0 {
				t.Errorf("planning recorded an outcome")
			}
		})
	}
}

// An all-or-nothing scale-up grows its group through AtomicIncreaseSize,
// the whole delta in one call.
func TestAllOrNothingScaleUpIsAtomic(t *testing.T) {
	checker, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := test.NewProvider()
	tmpl := test.BuildTemplate("a", 1000, 4<<30, nil)
	p.AddNodeGroup("a", 0, 8, 0, tmpl)
	opts := config.Defaults()
	registry := clusterstate.NewRegistry(p, opts)
	if err := registry.UpdateNodes(nil, now); err != nil {
		t.Fatal(err)
	}
	o := New(opts, p, registry, expander.NewChain(nil, nil), checker, &countingRecorder{})
	var pods []*apiv1.Pod
	for i := range 6 {
		pod := test.BuildPendingPod("p"+string(rune('0'+i)), 1000, 1<<20, "rs")
		pod.UID = types.UID(pod.Name)
		pods = append(pods, pod)
	}
	res, err := o.ScaleUp(Input{Snapshot: simulator.NewClusterSnapshot(), Pods: pods, Templates: map[string]*framework.NodeInfo{"a": tmpl},
		Now: now, Quotas: resourcequotas.NewTracker(resourcequotas.Limits{}, nil, nil), AllOrNothing: true})
	if err != nil || !res.ScaledUp() {
		t.Fatalf("scaled up: %v, err %v", res.ScaledUp(), err)
	}
	want := []test.Call{{Method: "AtomicIncreaseSize", Group: "a", Delta: 6}}
	if calls := p.Calls(); !reflect.DeepEqual(calls, want) {
		t.Errorf("calls %+v, want %+v", calls, want)
	}
}
