package digitalocean

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// unclearAnswers are the answers a DELETE may get, with whether the delete
// must count as done (the core then keeps the nodes tainted) and how many
// DELETEs are sent in all.
var unclearAnswers = []struct {
	name     string
	fault    doks.Fault
	done     bool
	requests int
}{
	{"502 after applying", doks.Fault{Status: 502, Applied: true, Times: 1}, true, 1},
	{"cut connection after applying", doks.Fault{Cut: true, Applied: true, Times: 1}, true, 1},
	// The listing shows it was not applied: sent once more, which takes.
	{"502 before applying", doks.Fault{Status: 502, Times: 1}, true, 2},
	{"cut connection before applying", doks.Fault{Cut: true, Times: 1}, true, 2},
	// Already gone (an earlier DELETE whose answer was lost).
	{"404", doks.Fault{Status: 404, Times: 1}, true, 1},
	{"422 refused", doks.Fault{Status: 422, Times: 1}, false, 1},
}

// A node deletion applied but answered unclearly is not reported as a
// failure: the core would give the node back (untaint it) while DOKS
// deletes it, and the pods it evicted would land there again.
func TestDeleteNodesSettlesAnUnclearAnswerByListing(t *testing.T) {
	for _, tc := range unclearAnswers {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, doks.Options{DeleteDelay: -1})
			p := e.pool(doks.PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 3, AutoScale: true, MaxNodes: 5})
			e.refresh()
			g := e.group(p.ID)
			f := tc.fault
			f.Operation = doks.OpDeleteNode
			e.sim.InjectFault(f)
			err := g.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0])})
			if (err == nil) != tc.done {
				t.Fatalf("DeleteNodes: %v; want success %v", err, tc.done)
			}
			if got := e.sim.RequestCount(doks.OpDeleteNode); got != tc.requests {
				t.Errorf("%d DELETE requests, want %d", got, tc.requests)
			}
			// What the core reads after the call: a node deleted is going,
			// one refused is running and the target unchanged.
			wantState, wantTarget := cloudprovider.InstanceDeleting, 2
			if !tc.done {
				wantState, wantTarget = cloudprovider.InstanceRunning, 3
			}
			if st := instanceState(t, g, p.Nodes[0]); st != wantState {
				t.Errorf("instance %s after the call, want %s", st, wantState)
			}
			if n, _ := g.TargetSize(); n != wantTarget {
				t.Errorf("target %d, want %d", n, wantTarget)
			}
			if tc.fault.Status == 404 {
				return // the simulator did not delete it: the fault said so
			}
			if leaving := e.simPool(p.ID).Nodes[0].Status.State == doks.StateDeleting; leaving != tc.done {
				t.Errorf("DOKS deleting the node: %v, want %v", leaving, tc.done)
			}
		})
	}
}

// The same for the deletion of a pool this autoscaler created, whether in
// place of its last nodes (DeleteNodes) or as an empty group (Delete).
func TestPoolDeletionSettlesAnUnclearAnswerByListing(t *testing.T) {
	for _, how := range []string{"DeleteNodes", "Delete"} {
		for _, tc := range unclearAnswers {
			t.Run(how+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, doks.Options{DeleteDelay: -1}, withSelection(SelectByTags), withAutoprovisioning(napSection))
				p := e.pool(doks.PoolSpec{Name: "created", Size: "s-2vcpu-4gb", Count: 1, Tags: createdTags})
				e.refresh()
				g := e.group(p.ID)
				f := tc.fault
				f.Operation = doks.OpDeleteNodePool
				e.sim.InjectFault(f)
				var err error
				if how == "Delete" {
					err = g.Delete()
				} else {
					err = g.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0])})
				}
				if (err == nil) != tc.done {
					t.Fatalf("%s: %v; want success %v", how, err, tc.done)
				}
				if got := e.sim.RequestCount(doks.OpDeleteNodePool); got != tc.requests {
					t.Errorf("%d DELETE requests, want %d", got, tc.requests)
				}
				if g.Exist() == tc.done {
					t.Errorf("group exists %v after the call, want %v", g.Exist(), !tc.done)
				}
				e.refresh()
				isGroup := slices.ContainsFunc(e.p.NodeGroups(), func(ng cloudprovider.NodeGroup) bool { return ng.Id() == p.ID })
				if isGroup == tc.done {
					t.Errorf("a node group after the next refresh: %v, want %v", isGroup, !tc.done)
				}
				if tc.fault.Status == 404 {
					return
				}
				if going := poolLeaving(new(e.simPool(p.ID))); going != tc.done {
					t.Errorf("DOKS deleting the pool: %v, want %v", going, tc.done)
				}
			})
		}
	}
}

// A restarted autoscaler (or a new leader) does not remember the pools it
// deleted: it tells one from the listing alone, whether DOKS still lists
// it while its nodes drain or no longer does, and makes no node group of
// it; the pool's nodes are reported going or gone, never running.
func TestRestartWhileADeletedPoolDrains(t *testing.T) {
	for _, vanish := range []bool{false, true} {
		name := map[bool]string{false: "pool listed while it drains", true: "pool gone from listings at once"}[vanish]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, doks.Options{DeleteDelay: -1, DeletedPoolsVanish: vanish}, withSelection(SelectByTags), withAutoprovisioning(napSection))
			p := e.pool(doks.PoolSpec{Name: "created", Size: "s-2vcpu-4gb", Count: 2, Tags: createdTags})
			hand := e.pool(doks.PoolSpec{Name: "hand", Size: "s-2vcpu-4gb", Count: 1, Tags: handTags})
			e.refresh()
			if err := e.group(p.ID).DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0]), kubeNode(p.Nodes[1])}); err != nil {
				t.Fatal(err)
			}
			restarted := e.restart()
			if err := restarted.Refresh(); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, g := range restarted.NodeGroups() {
				ids = append(ids, g.Id())
			}
			if !slices.Equal(ids, []string{hand.ID}) {
				t.Errorf("node groups after the restart %v, want only the pool made by hand %s", ids, hand.ID)
			}
			leaving := restarted.DeletingInstances()
			for _, n := range p.Nodes {
				node := kubeNode(n)
				has, err := restarted.HasInstance(node)
				if err != nil {
					t.Fatal(err)
				}
				// Listed: its instance is going; no longer listed: gone.
				if has != !vanish || leaving[node.Spec.ProviderID] != !vanish {
					t.Errorf("node %s: HasInstance %v, deleting %v; want both %v", n.Name, has, leaving[node.Spec.ProviderID], !vanish)
				}
			}
			if hn := kubeNode(hand.Nodes[0]); leaving[hn.Spec.ProviderID] {
				t.Errorf("the running node of the pool made by hand is reported deleting")
			}
		})
	}
}

// The sets kept by pool ID are bounded by what DigitalOcean lists: a
// deleted pool is forgotten once it is no longer listed, a predicted
// template once its pool is gone before its real template was fetched.
func TestDeletedAndPredictedSetsFollowTheListing(t *testing.T) {
	e := newEnv(t, doks.Options{}, withAutoprovisioning(napSection))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MaxNodes: 3})
	e.refresh()
	created := func() *NodeGroup {
		t.Helper()
		planned, err := e.p.NewNodeGroup("s-4vcpu-8gb", nil, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := planned.(*NodeGroup).CreateWithSize(1)
		if err != nil {
			t.Fatal(err)
		}
		return g.(*NodeGroup)
	}
	deleted := created()
	if err := deleted.Delete(); err != nil {
		t.Fatal(err)
	}
	gone := created()
	if _, err := e.godoClient().Kubernetes.DeleteNodePool(context.Background(), testCluster, gone.Id()); err != nil {
		t.Fatal(err)
	}
	e.p.m.mu.RLock()
	before := len(e.p.m.deleted) + len(e.p.m.predicted)
	e.p.m.mu.RUnlock()
	// The deleted pool; the predicted template of the other (Delete dropped
	// the deleted one's).
	if before != 2 {
		t.Fatalf("%d entries before the refresh, want 2", before)
	}
	e.refresh()
	e.p.m.mu.RLock()
	deletedAfter, predictedAfter := len(e.p.m.deleted), len(e.p.m.predicted)
	e.p.m.mu.RUnlock()
	// The other pool was never listed: to the provider its listing may
	// still lag its creation, so its group and predicted template stay
	// until createListDeadline.
	if deletedAfter != 0 || predictedAfter != 1 {
		t.Errorf("after a listing without the pools: %d deleted, %d predicted; want 0 and 1 (a creation not listed yet)", deletedAfter, predictedAfter)
	}
	e.advance(createListDeadline + time.Second)
	e.refresh()
	e.refresh()
	e.p.m.mu.RLock()
	defer e.p.m.mu.RUnlock()
	if len(e.p.m.deleted) != 0 || len(e.p.m.predicted) != 0 {
		t.Errorf("past the creation's deadline: deleted %v, predicted %d; want none", e.p.m.deleted, len(e.p.m.predicted))
	}
}

func instanceState(t *testing.T, g *NodeGroup, n *godo.KubernetesNode) cloudprovider.InstanceState {
	t.Helper()
	ins, err := g.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.Id == instanceID(n) && in.Status != nil {
			return in.Status.State
		}
	}
	return 0
}

// Two drains of one created pool end one after the other: the first
// deletes the pool in place of the last nodes, the second finds the pool
// deleted. Its nodes go with the pool, so the second succeeds without a
// request: a failure would make the core untaint its node.
func TestDeleteNodesOfAPoolAlreadyDeleted(t *testing.T) {
	e := newEnv(t, doks.Options{DeleteDelay: -1}, withSelection(SelectByTags), withAutoprovisioning(napSection))
	p := e.pool(doks.PoolSpec{Name: "created", Size: "s-2vcpu-4gb", Count: 2, Tags: createdTags})
	e.refresh()
	g := e.group(p.ID)
	if err := g.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0]), kubeNode(p.Nodes[1])}); err != nil {
		t.Fatal(err)
	}
	before := e.sim.TotalRequests()
	if err := g.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[1])}); err != nil {
		t.Errorf("DeleteNodes of a node of the deleted pool: %v", err)
	}
	if e.sim.TotalRequests() != before {
		t.Errorf("%d requests for a node of a pool already deleted, want none", e.sim.TotalRequests()-before)
	}
}
