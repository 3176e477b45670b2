package actuation

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// emptyGroup returns group g1 of n empty nodes, each planned for removal.
func emptyGroup(n int) (*sdtest.Cluster, []*scaledown.UnneededNode) {
	c := sdtest.NewCluster("g1", 0, n)
	var unneeded []*scaledown.UnneededNode
	for _, node := range c.Nodes {
		unneeded = append(unneeded, &scaledown.UnneededNode{Node: node, GroupID: "g1", Empty: true})
	}
	return c, unneeded
}

// A bulk deletion that fails part-way: the nodes the cloud did delete keep
// their taint (nothing may be scheduled there), the others are untainted,
// and the tracker hears one removal deleted and two failed.
func TestDeleteEmptyFailingPartWay(t *testing.T) {
	c, unneeded := emptyGroup(3)
	p := c.Provider
	p.Group("g1").FailDeletesAfter(1)
	kube := fake.NewClientset(c.Objects()...)
	outcomes := map[string]deletiontracker.Outcome{}
	removals := deletiontracker.New(func(node, _ string, o deletiontracker.Outcome) { outcomes[node] = o })
	opts := config.Defaults()
	opts.NodeDeleteDelayAfterTaint = 0
	a := New(opts, Deps{Kube: kube, Provider: p, Outcomes: &sdtest.Outcomes{}, Removals: removals}, Synchronous())

	a.DeleteEmpty(context.Background(), unneeded)

	calls := p.CallsOf("DeleteNodes")
	if len(calls) != 1 || len(calls[0].Nodes) != 3 {
		t.Fatalf("DeleteNodes calls = %+v, want one call with 3 nodes", calls)
	}
	for i, name := range calls[0].Nodes {
		if tainted := clusterstate.HasToBeDeletedTaint(getNode(t, kube, name)); tainted != (i == 0) {
			t.Errorf("node %s (#%d of the batch) tainted = %v, want %v", name, i+1, tainted, i == 0)
		}
		want := deletiontracker.Failed
		if i == 0 {
			want = deletiontracker.Deleted
		}
		if outcomes[name] != want {
			t.Errorf("node %s: removal outcome %v, want %v", name, outcomes[name], want)
		}
	}
	if ts, _ := p.Group("g1").TargetSize(); ts != 2 {
		t.Errorf("target = %d, want 2", ts)
	}
}

func getNode(t *testing.T, kube *fake.Clientset, name string) *apiv1.Node {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
