package resourcequotas

import (
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// prices: nodes named small* cost $0.10/h, big* $0.50/h, anything else
// has no price (test.PricingModel prices by name prefix; a node with
// neither prefix costs 0 per core, so an unknown price is modelled by
// pricing it through a model that errs).
type namedPrices map[string]float64

func (p namedPrices) price(n *apiv1.Node) (float64, error) {
	for prefix, v := range p {
		if strings.HasPrefix(n.Name, prefix) {
			return v, nil
		}
	}
	return 0, errNoPrice
}

var errNoPrice = &noPrice{}

type noPrice struct{}

func (*noPrice) Error() string { return "no price" }

func money(max float64, autoscaled ...string) *Money {
	p := namedPrices{"small": 0.10, "big": 0.50}
	return &Money{MaxHourly: max, price: p.price, autoscaled: func(n *apiv1.Node) bool {
		for _, a := range autoscaled {
			if strings.HasPrefix(n.Name, a) {
				return true
			}
		}
		return false
	}}
}

func TestSpendCountsAutoscaledGroupsOnly(t *testing.T) {
	nodes := []*apiv1.Node{node("small-1", 1000, gib), node("big-1", 4000, 8*gib), node("big-unmanaged", 4000, 8*gib), tainted(node("small-going", 1000, gib))}
	tr := NewTracker(Limits{Money: money(0, "small", "big-1")}, nodes, nil)
	if got := tr.Live().HourlyCost; got < 0.5999 || got > 0.6001 {
		t.Fatalf("spend = %v, want 0.60: a node of a pool not autoscaled and a node being removed cost nothing here", got)
	}
	tr.Remove(nodes[0])
	if got := tr.Used().HourlyCost; got < 0.4999 || got > 0.5001 {
		t.Fatalf("after removing small-1: %v, want 0.50", got)
	}
}

func TestRoomUnderMaxHourlyCost(t *testing.T) {
	nodes := []*apiv1.Node{node("big-1", 4000, 8*gib), node("big-2", 4000, 8*gib)} // $1.00/h
	cases := []struct {
		name     string
		max      float64
		tmpl     *apiv1.Node
		want     int
		wantRoom int
		wantStop Resource
	}{
		{"no money limit", 0, node("big-t", 4000, 8*gib), 5, 5, ""},
		{"bounds", 2.2, node("big-t", 4000, 8*gib), 5, 2, ""},
		{"exactly at the limit fits (rounding)", 1.3, node("small-t", 1000, gib), 5, 3, ""},
		{"reached", 1.4, node("big-t", 4000, 8*gib), 5, 0, Cost},
		{"a cheaper node still fits", 1.4, node("small-t", 1000, gib), 5, 4, ""},
		{"a node with no price fits none", 100, node("mystery", 1000, gib), 1, 0, Cost},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(Limits{Money: money(c.max, "big", "small", "mystery")}, nodes, nil)
			room, stop := tr.Room(c.tmpl, c.want)
			if room != c.wantRoom || stop != c.wantStop {
				t.Fatalf("Room = %d, %q; want %d, %q", room, stop, c.wantRoom, c.wantStop)
			}
		})
	}
}

func TestPlannedNodesCountTowardSpend(t *testing.T) {
	tr := NewTracker(Limits{Money: money(1.0, "big")}, nil, nil)
	tr.Add(node("big-t", 4000, 8*gib), 1) // upcoming or planned
	if room, stop := tr.Room(node("big-t", 4000, 8*gib), 3); room != 1 || stop != "" {
		t.Fatalf("Room = %d, %q; want 1", room, stop)
	}
	tr.Add(node("big-t", 4000, 8*gib), 1)
	room, stop := tr.Room(node("small-t", 1000, gib), 1)
	if room != 0 || stop != Cost {
		t.Fatalf("Room = %d, %q at the limit; want 0, %q", room, stop, Cost)
	}
	msg := tr.Explain(stop, nil, 0, node("small-t", 1000, gib))
	for _, want := range []string{"max hourly cost reached", "$1.0000/h of --max-hourly-cost $1.0000/h", "$0.1000/h"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("Explain = %q, want it to name %q", msg, want)
		}
	}
}

func TestUnpricedLiveNodeStopsBuyingUnderAMoneyLimit(t *testing.T) {
	tr := NewTracker(Limits{Money: money(10, "mystery", "small")}, []*apiv1.Node{node("mystery-1", 1000, gib)}, nil)
	if room, stop := tr.Room(node("small-t", 1000, gib), 1); room != 0 || stop != Cost {
		t.Fatalf("Room = %d, %q; want 0, %q: a live node with no price keeps the spend unknown", room, stop, Cost)
	}
	if msg := tr.Explain(Cost, nil, 0, node("small-t", 1000, gib)); !strings.Contains(msg, "price_overrides") {
		t.Fatalf("Explain = %q, want it to point at price_overrides", msg)
	}
	tr2 := NewTracker(Limits{Money: money(0, "mystery")}, []*apiv1.Node{node("mystery-1", 1000, gib)}, nil)
	if room, _ := tr2.Room(node("small-t", 1000, gib), 1); room != 1 {
		t.Fatalf("without a money limit an unknown price stops nothing, room = %d", room)
	}
}

type costLimited struct {
	*test.NodeGroup
	limit float64
}

func (c costLimited) MaxHourlyCost() float64 { return c.limit }

func TestGroupRoomUnderTheGroupsHourlyLimit(t *testing.T) {
	p := test.NewProvider()
	g := costLimited{NodeGroup: p.AddNodeGroup("g", 0, 100, 3, nil), limit: 2.0}
	tr := NewTracker(Limits{Money: money(0, "big")}, nil, nil)
	if room, stop := tr.GroupRoom(g, 3, node("big-t", 4000, 8*gib), 5); room != 1 || stop != "" {
		t.Fatalf("GroupRoom = %d, %q; want 1 ($2.00/h ÷ $0.50/h = 4 nodes, 3 there)", room, stop)
	}
	if room, stop := tr.GroupRoom(g, 4, node("big-t", 4000, 8*gib), 5); room != 0 || stop != GroupCost {
		t.Fatalf("GroupRoom = %d, %q; want 0, %q", room, stop, GroupCost)
	}
	msg := tr.Explain(GroupCost, g, 4, node("big-t", 4000, 8*gib))
	if !strings.Contains(msg, "4 nodes at $0.5000/h = $2.0000/h of the group's $2.0000/h") {
		t.Fatalf("Explain = %q", msg)
	}
	plain := p.AddNodeGroup("plain", 0, 100, 3, nil)
	if room, _ := tr.GroupRoom(plain, 3, node("big-t", 4000, 8*gib), 5); room != 5 {
		t.Fatalf("a group without a limit: room %d, want 5", room)
	}
}

func TestNewLimitsMoney(t *testing.T) {
	p := test.NewProvider()
	l, err := NewLimits(config.AutoscalingOptions{}, p)
	if err != nil || l.Money != nil {
		t.Fatalf("no pricing, no limit: Money = %v, err %v; want none", l.Money, err)
	}
	l, err = NewLimits(config.AutoscalingOptions{MaxHourlyCost: 3}, p)
	if err == nil || !strings.Contains(err.Error(), "--max-hourly-cost") || l.Money == nil {
		t.Fatalf("a money limit without pricing: Money = %v, err %v; want the limit kept (nothing bought) and an error naming the flag", l.Money, err)
	}
	tr := NewTracker(l, nil, nil)
	if room, stop := tr.Room(node("n", 1000, gib), 1); room != 0 || stop != Cost {
		t.Fatalf("Room = %d, %q; want nothing bought without prices", room, stop)
	}
	p.SetPricing(&test.PricingModel{PerCoreHour: 0.01})
	grp := p.AddNodeGroup("g", 0, 10, 1, nil)
	n := node("g-1", 2000, gib)
	p.AddNode(grp.Id(), n)
	l, err = NewLimits(config.AutoscalingOptions{MaxHourlyCost: 3}, p)
	if err != nil || l.Money == nil || l.Money.MaxHourly != 3 {
		t.Fatalf("Money = %+v, err %v", l.Money, err)
	}
	tr = NewTracker(l, []*apiv1.Node{n, node("other", 2000, gib)}, nil)
	if got := tr.Live().HourlyCost; got < 0.0199 || got > 0.0201 {
		t.Fatalf("spend = %v, want 0.02 (the group's node only)", got)
	}
}

// The account's instance quota bounds the nodes plans add, not those coming
// up (the provider's count holds them already).
func TestRoomUnderTheInstanceQuota(t *testing.T) {
	q := &cloudprovider.InstanceQuota{Limit: 25, Instances: 23, Headroom: 2}
	tr := NewTracker(Limits{Instances: q}, nil, nil)
	p := test.NewProvider()
	up := tr.WithUpcoming([]clusterstate.NodeGroupState{{Group: p.AddNodeGroup("g", 0, 10, 3, nil), UpcomingUnregistered: 3}},
		func(string) *apiv1.Node { return node("t", 1000, gib) })
	if room, stop := up.Room(node("t", 1000, gib), 5); room != 2 || stop != "" {
		t.Fatalf("Room = %d, %q; want 2 (upcoming nodes are droplets already counted)", room, stop)
	}
	up.Add(node("t", 1000, gib), 2)
	room, stop := up.Room(node("t", 1000, gib), 1)
	if room != 0 || stop != Quota {
		t.Fatalf("Room = %d, %q; want 0, %q", room, stop, Quota)
	}
	if msg := up.Explain(Quota, nil, 0, node("t", 1000, gib)); !strings.Contains(msg, "23 droplets of DigitalOcean's droplet_limit 25") || !strings.Contains(msg, "2 planned") {
		t.Fatalf("Explain = %q", msg)
	}
	plain := NewTracker(Limits{}, nil, nil)
	if room, _ := plain.Room(node("t", 1000, gib), 5); room != 5 {
		t.Fatalf("unknown quota: room %d, want 5", room)
	}
}

type quotaProvider struct {
	*test.Provider
	q     cloudprovider.InstanceQuota
	known bool
}

func (p quotaProvider) InstanceQuota() (cloudprovider.InstanceQuota, bool) { return p.q, p.known }

func TestNewLimitsReadsTheInstanceQuota(t *testing.T) {
	p := quotaProvider{Provider: test.NewProvider(), q: cloudprovider.InstanceQuota{Limit: 25, Instances: 25}, known: true}
	l, _ := NewLimits(config.AutoscalingOptions{}, p)
	if l.Instances == nil || l.Instances.Limit != 25 {
		t.Fatalf("Instances = %+v, want the provider's", l.Instances)
	}
	p.known = false
	if l, _ := NewLimits(config.AutoscalingOptions{}, p); l.Instances != nil {
		t.Fatalf("unknown quota: Instances = %+v, want nil", l.Instances)
	}
}

// Nodes coming up in a group without a template have no known price: under
// a money limit nothing more is bought until they are priced.
func TestUpcomingNodesWithoutATemplateAreUnpriced(t *testing.T) {
	p := test.NewProvider()
	tr := NewTracker(Limits{Money: money(100, "small")}, nil, nil)
	up := tr.WithUpcoming([]clusterstate.NodeGroupState{{Group: p.AddNodeGroup("g", 0, 10, 2, nil), UpcomingUnregistered: 2}},
		func(string) *apiv1.Node { return nil })
	if room, stop := up.Room(node("small-t", 1000, gib), 1); room != 0 || stop != Cost {
		t.Fatalf("Room = %d, %q; want 0, %q", room, stop, Cost)
	}
}
