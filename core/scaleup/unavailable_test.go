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
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

func mustChecker(t *testing.T) *simulator.PredicateChecker {
	t.Helper()
	c, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fixedScaleUp is an orchestrator over p's groups and the input of a
// scale-up for n pending pods of 1000m.
func fixedScaleUp(t *testing.T, p *test.Provider, checker *simulator.PredicateChecker, n int) (*Orchestrator, Input) {
	t.Helper()
	opts := config.Defaults()
	now := time.Now()
	registry := clusterstate.NewRegistry(p, opts)
	if err := registry.UpdateNodes(nil, now); err != nil {
		t.Fatal(err)
	}
	templates := map[string]*framework.NodeInfo{}
	for _, g := range p.NodeGroups() {
		ni, err := g.TemplateNodeInfo()
		if err != nil {
			t.Fatal(err)
		}
		templates[g.Id()] = ni
	}
	var pods []*apiv1.Pod
	for i := range n {
		pod := test.BuildPendingPod("p"+string(rune('0'+i)), 1000, 1<<20, "rs")
		pod.UID = types.UID(pod.Name)
		pods = append(pods, pod)
	}
	o := New(opts, p, registry, expander.NewChain(nil, nil), checker, &countingRecorder{})
	return o, Input{Snapshot: simulator.NewClusterSnapshot(), Pods: pods, Templates: templates, Now: now,
		Quotas: resourcequotas.NewTracker(resourcequotas.Limits{}, nil, nil)}
}

// stateOf is the registry's state of group id, with g in its place.
func stateOf(t *testing.T, o *Orchestrator, id string, g cloudprovider.NodeGroup) clusterstate.NodeGroupState {
	t.Helper()
	for _, gs := range o.planner.registry.NodeGroups() {
		if gs.Group.Id() == id {
			gs.Group = g
			return gs
		}
	}
	t.Fatalf("no group %s", id)
	return clusterstate.NodeGroupState{}
}

// A pool on demand whose size is refused for capacity: the same loop plans
// again without the size and creates the next cheapest (one refused
// request, no pause of pool creation).
func TestSizeRefusedForCapacityTakesTheNextCheapestInTheSameLoop(t *testing.T) {
	machines := []machine{
		{name: "cheap", milliCPU: 4000, price: 0.5},
		{name: "dearer", milliCPU: 4000, price: 0.7},
		{name: "dearest", milliCPU: 4000, price: 0.9},
	}
	p := test.NewProvider()
	p.AllowCreation()
	p.OutOfStock("cheap")
	o, in := newGroupScaleUp(t, p, machines, []*apiv1.Pod{test.BuildPendingPod("x", 1000, test.GiB, "rs")})
	res, err := o.ScaleUp(in)
	if err != nil {
		t.Fatal(err)
	}
	creates := p.CallsOf("CreateWithSize")
	if len(creates) != 2 || !strings.HasPrefix(creates[0].Group, "cheap") || !strings.HasPrefix(creates[1].Group, "dearer") {
		t.Fatalf("creations %v, want cheap (refused) then dearer", creates)
	}
	if !res.ScaledUp() {
		t.Fatal("no scale-up: want the next cheapest size in the same loop")
	}
	if until := o.exec.creationPausedUntil(); !until.IsZero() {
		t.Fatalf("pool creation paused until %v after a capacity refusal, want no pause", until)
	}
}

// Among fixed pools, a group whose size is refused is left for the next
// option in the same loop, and a group the provider says is unavailable is
// never asked.
func TestUnavailableFixedPoolGivesWayToTheNextOption(t *testing.T) {
	checker := mustChecker(t)
	p := test.NewProvider()
	a := p.AddNodeGroup("a", 0, 10, 0, test.BuildTemplate("a", 2000, 4*test.GiB, nil))
	p.AddNodeGroup("b", 0, 10, 0, test.BuildTemplate("b", 2000, 4*test.GiB, nil))
	a.InjectError("IncreaseSize", &cloudprovider.SizeUnavailableError{Size: "a", Region: "test", Message: "out of stock"})
	o, in := fixedScaleUp(t, p, checker, 2)
	o.exec.strategy = expander.NewChain([]expander.Filter{prefer("a")}, nil)
	res, err := o.ScaleUp(in)
	if err != nil {
		t.Fatal(err)
	}
	incs := p.CallsOf("IncreaseSize")
	if !res.ScaledUp() || len(incs) != 2 || incs[1].Group != "b" {
		t.Fatalf("increase calls %v (scaled up %v), want a refused then b", incs, res.ScaledUp())
	}
}

// A group reporting its size unavailable is skipped with the reason.
func TestUnavailableGroupIsSkipped(t *testing.T) {
	checker := mustChecker(t)
	p := test.NewProvider()
	p.AddNodeGroup("a", 0, 10, 0, test.BuildTemplate("a", 2000, 4*test.GiB, nil))
	o, in := fixedScaleUp(t, p, checker, 1)
	g := &unavailableGroup{NodeGroup: p.Group("a"), why: "size a unavailable until later: out of stock"}
	if r := o.planner.skipReason(stateOf(t, o, "a", g), in); r != Reason(g.why) {
		t.Fatalf("skip reason %q, want %q", r, g.why)
	}
}

type unavailableGroup struct {
	*test.NodeGroup
	why string
}

func (g *unavailableGroup) Unavailable() string { return g.why }

// prefer is an expander filter that keeps the option of group id.
type prefer string

func (p prefer) BestOptions(options []expander.Option) []expander.Option {
	for _, o := range options {
		if o.NodeGroup.Id() == string(p) {
			return []expander.Option{o}
		}
	}
	return options
}
