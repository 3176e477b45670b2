package scaledown

import (
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/budgets"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

// TestChoose checks the decision alone: which unneeded nodes start their
// removal now, and why each other one waits.
func TestChoose(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	unneeded := func(name, group string, empty bool, since time.Duration) *UnneededNode {
		return &UnneededNode{Node: test.BuildNode(name, 1000, test.GiB), GroupID: group, Empty: empty, Since: now.Add(-since)}
	}
	group := func(target, minSize, deleting int) GroupFacts {
		return GroupFacts{Target: target, MinSize: minSize, Deleting: deleting, UnneededTime: 10 * time.Minute, UnreadyTime: 20 * time.Minute}
	}
	type kept struct {
		node   string
		reason simulator.UnremovableReason
	}
	cases := []struct {
		name       string
		nodes      []*UnneededNode
		groups     map[string]GroupFacts
		budgets    budgets.Budgets
		limits     resourcequotas.Limits
		wantEmpty  []string
		wantDrain  []string
		wantKept   []kept
		wantNextAt time.Duration // after now; 0: none
	}{
		{name: "unneeded long enough: empty and drained",
			nodes:   []*UnneededNode{unneeded("e", "g", true, time.Hour), unneeded("d", "g", false, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			budgets: budgets.New(10, 1, 0, 0), wantEmpty: []string{"e"}, wantDrain: []string{"d"}},
		{name: "too young: kept, and the loop wakes when it comes of age",
			nodes:   []*UnneededNode{unneeded("young", "g", true, 4*time.Minute)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			budgets: budgets.New(10, 1, 0, 0), wantKept: []kept{{"young", simulator.NotUnneededLongEnough}}, wantNextAt: 6 * time.Minute},
		{name: "unready nodes wait for the unready time",
			nodes: []*UnneededNode{func() *UnneededNode {
				u := unneeded("unready", "g", false, 15*time.Minute)
				u.Unready = true
				return u
			}()},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			budgets: budgets.New(10, 1, 0, 0), wantKept: []kept{{"unready", simulator.NotUnreadyLongEnough}}, wantNextAt: 5 * time.Minute},
		{name: "the drain budget leaves the second drain waiting, uncounted",
			nodes:   []*UnneededNode{unneeded("d1", "g", false, time.Hour), unneeded("d2", "g", false, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			budgets: budgets.New(10, 1, 0, 0), wantDrain: []string{"d1"}, wantKept: []kept{{"d2", simulator.NoReason}}},
		{name: "min size counts removals in flight and those picked",
			nodes:   []*UnneededNode{unneeded("a", "g", true, time.Hour), unneeded("b", "g", true, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(4, 2, 1)},
			budgets: budgets.New(10, 1, 1, 0), wantEmpty: []string{"a"}, wantKept: []kept{{"b", simulator.NodeGroupMinSizeReached}}},
		{name: "the cluster's minimum cores keep a node",
			nodes:   []*UnneededNode{unneeded("a", "g", true, time.Hour), unneeded("b", "g", true, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			limits:  resourcequotas.Limits{MinMilliCPU: 2000},
			budgets: budgets.New(10, 1, 0, 0), wantEmpty: []string{"a"}, wantKept: []kept{{"b", simulator.MinimalResourceLimitExceeded}}},
		{name: "min size: the empty node goes, the node to drain waits",
			nodes:   []*UnneededNode{unneeded("e", "g", true, time.Hour), unneeded("d", "g", false, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(3, 2, 0)},
			budgets: budgets.New(10, 1, 0, 0), wantEmpty: []string{"e"}, wantKept: []kept{{"d", simulator.NodeGroupMinSizeReached}}},
		{name: "--max-drain-parallelism=2 starts two drains",
			nodes:   []*UnneededNode{unneeded("d1", "g", false, time.Hour), unneeded("d2", "g", false, time.Hour), unneeded("d3", "g", false, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			budgets: budgets.New(10, 2, 0, 0), wantDrain: []string{"d1", "d2"}, wantKept: []kept{{"d3", simulator.NoReason}}},
		{name: "--max-drain-parallelism=5 starts every drain",
			nodes:   []*UnneededNode{unneeded("d1", "g", false, time.Hour), unneeded("d2", "g", false, time.Hour), unneeded("d3", "g", false, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			budgets: budgets.New(10, 5, 0, 0), wantDrain: []string{"d1", "d2", "d3"}},
		{name: "--max-scale-down-parallelism=2 starts two empty removals",
			nodes:   []*UnneededNode{unneeded("e1", "g", true, time.Hour), unneeded("e2", "g", true, time.Hour), unneeded("e3", "g", true, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 0)},
			budgets: budgets.New(2, 1, 0, 0), wantEmpty: []string{"e1", "e2"}, wantKept: []kept{{"e3", simulator.NoReason}}},
		{name: "removals in flight use --max-scale-down-parallelism: none starts",
			nodes:   []*UnneededNode{unneeded("d1", "g", false, time.Hour), unneeded("e1", "g", true, time.Hour)},
			groups:  map[string]GroupFacts{"g": group(5, 0, 2)},
			budgets: budgets.New(2, 10, 2, 2), wantKept: []kept{{"d1", simulator.NoReason}, {"e1", simulator.NoReason}}},
		{name: "a node of an unknown group is left alone",
			nodes:   []*UnneededNode{unneeded("x", "gone", true, time.Hour)},
			groups:  map[string]GroupFacts{},
			budgets: budgets.New(10, 1, 0, 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Three live nodes of 1 core: the two unneeded and another.
			live := []*apiv1.Node{test.BuildNode("other", 1000, test.GiB)}
			for _, u := range c.nodes {
				live = append(live, u.Node)
			}
			live = live[:min(len(live), 3)]
			p := choose(c.nodes, c.groups, c.budgets, resourcequotas.NewTracker(c.limits, live, nil), now)
			if got := names(p.Empty); !reflect.DeepEqual(got, c.wantEmpty) {
				t.Errorf("empty = %v, want %v", got, c.wantEmpty)
			}
			if got := names(p.Drain); !reflect.DeepEqual(got, c.wantDrain) {
				t.Errorf("drain = %v, want %v", got, c.wantDrain)
			}
			var gotKept []kept
			for _, k := range p.Kept {
				gotKept = append(gotKept, kept{k.Node.Node.Name, k.Reason})
			}
			if !reflect.DeepEqual(gotKept, c.wantKept) {
				t.Errorf("kept = %v, want %v", gotKept, c.wantKept)
			}
			var wantNext time.Time
			if c.wantNextAt > 0 {
				wantNext = now.Add(c.wantNextAt)
			}
			if !p.NextAt.Equal(wantNext) {
				t.Errorf("NextAt = %v, want %v", p.NextAt, wantNext)
			}
		})
	}
}

func names(nodes []*UnneededNode) []string {
	var out []string
	for _, u := range nodes {
		out = append(out, u.Node.Name)
	}
	return out
}
