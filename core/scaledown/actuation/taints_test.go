package actuation

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

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
