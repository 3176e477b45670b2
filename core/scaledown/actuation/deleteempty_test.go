package actuation

import (
	"context"
	"fmt"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// emptyGroup: group g1 (min 0, max 10) of n empty nodes, each planned for
// removal.
func emptyGroup(n int) (*test.Provider, []runtime.Object, []*scaledown.UnneededNode) {
	p := test.NewProvider()
	p.AddNodeGroup("g1", 0, 10, n, test.BuildTemplate("g1", 2000, 4*test.GiB, nil))
	var objs []runtime.Object
	var unneeded []*scaledown.UnneededNode
	for i := range n {
		node := test.BuildNode(fmt.Sprintf("g1-n%d", i), 2000, 4*test.GiB)
		p.AddNode("g1", node)
		objs = append(objs, node)
		unneeded = append(unneeded, &scaledown.UnneededNode{Node: node, GroupID: "g1", Empty: true})
	}
	return p, objs, unneeded
}

// A bulk deletion that fails part-way: the nodes the cloud did delete keep
// their taint (nothing may be scheduled there), the others are untainted,
// and the tracker hears one removal deleted and two failed.
func TestDeleteEmptyFailingPartWay(t *testing.T) {
	p, objs, unneeded := emptyGroup(3)
	p.Group("g1").FailDeletesAfter(1)
	kube := fake.NewClientset(objs...)
	outcomes := map[string]deletiontracker.Outcome{}
	removals := deletiontracker.New(func(node, _ string, o deletiontracker.Outcome) { outcomes[node] = o })
	opts := config.Defaults()
	opts.NodeDeleteDelayAfterTaint = 0
	a := New(opts, Deps{Kube: kube, Provider: p, Recorder: record.NewFakeRecorder(100),
		StatusRef: &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "status"}, Removals: removals}, Synchronous())

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
