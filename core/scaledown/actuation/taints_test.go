package actuation

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// The start-up clean-up removes stale taints, except from nodes whose
// instance the provider is deleting: a new leader must not reopen them.
func TestCleanUpStaleTaintsKeepsDeletingNodes(t *testing.T) {
	tainted := func(name, providerID string) *apiv1.Node {
		return &apiv1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiv1.NodeSpec{ProviderID: providerID, Taints: []apiv1.Taint{
				{Key: clusterstate.ToBeDeletedTaint, Value: "1700000000", Effect: apiv1.TaintEffectNoSchedule},
				{Key: "other", Effect: apiv1.TaintEffectNoSchedule},
			}},
		}
	}
	nodes := []*apiv1.Node{tainted("leaving", "digitalocean://1"), tainted("stale", "digitalocean://2")}
	kube := fake.NewSimpleClientset(nodes[0].DeepCopy(), nodes[1].DeepCopy())
	if err := CleanUpStaleTaints(context.Background(), kube, nodes, map[string]bool{"digitalocean://1": true}, false); err != nil {
		t.Fatal(err)
	}
	has := func(name string) bool {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range n.Spec.Taints {
			if tt.Key == clusterstate.ToBeDeletedTaint {
				return true
			}
		}
		if len(n.Spec.Taints) != 1 {
			t.Errorf("node %s: other taints touched: %v", name, n.Spec.Taints)
		}
		return false
	}
	if !has("leaving") {
		t.Error("the taint was removed from a node whose instance is being deleted")
	}
	if has("stale") {
		t.Error("the stale taint on a running node was kept")
	}
}

// reportingProvider reports instances being deleted outside its groups,
// as the DigitalOcean provider reports the nodes of a pool being deleted.
type reportingProvider struct {
	*test.Provider
	deleting map[string]bool
}

func (p reportingProvider) DeletingInstances() map[string]bool { return p.deleting }

// A new leader keeps the taint on every node whose instance is on its way
// out, whatever it remembers: one the provider reports going (in a group
// being deleted, no node group any more) and one the cloud no longer has;
// only a node running in a live group is given back.
func TestLeavingInstancesKeepTheirTaintAtStartUp(t *testing.T) {
	tainted := func(name string) *apiv1.Node {
		return &apiv1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiv1.NodeSpec{ProviderID: "test://" + name, Taints: []apiv1.Taint{
				{Key: clusterstate.ToBeDeletedTaint, Value: "1700000000", Effect: apiv1.TaintEffectNoSchedule},
			}},
		}
	}
	p := test.NewProvider()
	p.AddNodeGroup("live", 0, 5, 2, nil)
	running, inDeletedPool, gone := tainted("running"), tainted("in-deleted-pool"), tainted("gone")
	p.AddNode("live", running)
	p.AddNode("live", inDeletedPool) // listed by the cloud, reported going
	p.AddNode("live", gone)
	if err := p.Group("live").DeleteNodes([]*apiv1.Node{gone}); err != nil { // the cloud no longer has it
		t.Fatal(err)
	}
	provider := reportingProvider{Provider: p, deleting: map[string]bool{inDeletedPool.Spec.ProviderID: true}}
	nodes := []*apiv1.Node{running, inDeletedPool, gone}
	kube := fake.NewSimpleClientset(running.DeepCopy(), inDeletedPool.DeepCopy(), gone.DeepCopy())

	if err := CleanUpStaleTaints(context.Background(), kube, nodes, LeavingInstances(provider, nodes), false); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"running": false, "in-deleted-pool": true, "gone": true} {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := clusterstate.HasToBeDeletedTaint(n); got != want {
			t.Errorf("node %s tainted after the clean-up: %v, want %v", name, got, want)
		}
	}
}
