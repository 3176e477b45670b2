package scaleup

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// When the provider gives no template, the copy is made from a ready node
// that is not cordoned, as upstream does at --scale-from-unschedulable=false
// (isNodeGoodTemplateCandidate): a cordoned node's labels or taints may be
// the reason it was cordoned. With only cordoned nodes there is no template.
func TestTemplateFromNodeSkipsCordonedNodes(t *testing.T) {
	cases := []struct {
		name        string
		schedulable bool // whether the second node, g1-b, is schedulable
		want        string
	}{
		{name: "a schedulable node is copied, not the cordoned one", schedulable: true, want: "b"},
		{name: "only cordoned nodes: no template", schedulable: false, want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := test.NewProvider()
			g := p.AddNodeGroup("g1", 0, 10, 2, nil) // no provider template
			a := test.BuildNode("g1-a", 2000, 4*test.GiB)
			a.Labels["which"] = "a"
			a.Spec.Unschedulable = true
			b := test.BuildNode("g1-b", 2000, 4*test.GiB)
			b.Labels["which"] = "b"
			b.Spec.Unschedulable = !tc.schedulable
			p.AddNode("g1", a)
			p.AddNode("g1", b)
			groupOf := func(string) string { return "g1" }

			ready := func(n *apiv1.Node) bool { r, _ := clusterstate.NodeReadiness(n); return r }
			built := BuildTemplates(p, []clusterstate.NodeGroupState{{Group: g, Target: 2}}, []*apiv1.Node{a, b},
				groupOf, ready, nil, nil, clusterstate.TaintConfig{}, nil)
			templates, errs := built.ByGroup, built.Errors

			got := ""
			if ti := templates["g1"]; ti != nil {
				got = ti.Node().Labels["which"]
			}
			if got != tc.want {
				t.Fatalf("template copied from node %q (errors %v), want %q", got, errs, tc.want)
			}
		})
	}
}
