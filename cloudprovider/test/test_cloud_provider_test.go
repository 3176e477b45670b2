package test

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

func TestProviderRecordsAndEnforcesBounds(t *testing.T) {
	p := NewProvider()
	g := p.AddNodeGroup("g1", 1, 3, 1, BuildTemplate("g1", 2000, 4*GiB, nil))
	n := BuildNode("n1", 2000, 4*GiB)
	p.AddNode("g1", n)

	if got, _ := p.NodeGroupForNode(n); got == nil || got.Id() != "g1" {
		t.Fatalf("NodeGroupForNode = %v, want g1", got)
	}
	if err := g.IncreaseSize(3); err == nil {
		t.Fatal("IncreaseSize above max succeeded")
	}
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	ins, _ := g.Nodes()
	creating := 0
	for _, in := range ins {
		if in.Status.State == cloudprovider.InstanceCreating {
			creating++
		}
	}
	if creating != 2 {
		t.Fatalf("creating instances = %d, want 2", creating)
	}
	if err := g.DecreaseTargetSize(-1); err != nil {
		t.Fatal(err)
	}
	if ts, _ := g.TargetSize(); ts != 2 {
		t.Fatalf("target = %d, want 2", ts)
	}
	if err := g.DeleteNodes(nil); err != nil {
		t.Fatal(err)
	}
	g.SetTargetSize(1)
	if err := g.DeleteNodes([]*apiv1.Node{n}); err == nil {
		t.Fatal("DeleteNodes below min succeeded")
	}
	calls := p.Calls()
	if len(calls) != 5 || calls[0].Method != "IncreaseSize" || calls[2].Method != "DecreaseTargetSize" {
		t.Fatalf("calls = %+v", calls)
	}
}
