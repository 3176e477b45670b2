package actuation

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// A group the cloud deletes in place of its last nodes (a DOKS pool node
// autoprovisioning created): the removal that takes its last nodes tells
// GroupGone, and only that one; the nodes count as deleted, keep their
// taint, and are no failed removal. Removing part of the group tells
// nothing.
func TestGroupGoneWithItsLastNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   int
		remove  int
		drain   bool
		gone    bool
		deletes int // DeleteNodes calls
	}{
		{name: "every node, empty (one call)", nodes: 2, remove: 2, gone: true, deletes: 1},
		{name: "every node, drained (one call each)", nodes: 2, remove: 2, drain: true, gone: true, deletes: 2},
		{name: "part of the group", nodes: 3, remove: 2, deletes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, unneeded := emptyGroup(tc.nodes)
			unneeded = unneeded[:tc.remove]
			g := c.Provider.Group("g1")
			g.GoesWithLastNodes()
			kube := sdtest.NewKube(c.Objects()...)
			outcomes := map[string]deletiontracker.Outcome{}
			var mu sync.Mutex
			var gone []string
			opts := config.Defaults()
			opts.NodeDeleteDelayAfterTaint = 0
			a := New(opts, Deps{Kube: kube, Provider: c.Provider, Outcomes: &sdtest.Outcomes{},
				Removals:  deletiontracker.New(func(node, _ string, o deletiontracker.Outcome) { mu.Lock(); outcomes[node] = o; mu.Unlock() }),
				GroupGone: func(g cloudprovider.NodeGroup) { mu.Lock(); gone = append(gone, g.Id()); mu.Unlock() },
			}, Synchronous(), WithPacing(5*time.Millisecond, 5*time.Millisecond))

			if tc.drain {
				for _, u := range unneeded {
					u.Empty = false
				}
				a.Drain(context.Background(), unneeded)
			} else {
				a.DeleteEmpty(context.Background(), unneeded)
			}

			if want := map[bool][]string{true: {"g1"}}[tc.gone]; !slices.Equal(gone, want) {
				t.Errorf("GroupGone heard %v, want %v", gone, want)
			}
			if n := len(c.Provider.CallsOf("DeleteNodes")); n != tc.deletes {
				t.Errorf("%d DeleteNodes calls, want %d", n, tc.deletes)
			}
			for _, u := range unneeded {
				if outcomes[u.Node.Name] != deletiontracker.Deleted {
					t.Errorf("node %s: outcome %v, want deleted", u.Node.Name, outcomes[u.Node.Name])
				}
				if !clusterstate.HasToBeDeletedTaint(getNode(t, kube.Clientset, u.Node.Name)) {
					t.Errorf("node %s lost its taint", u.Node.Name)
				}
			}
		})
	}
}
