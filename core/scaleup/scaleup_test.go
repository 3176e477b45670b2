package scaleup

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

func groupState(p *test.Provider, id string, target, max int) clusterstate.NodeGroupState {
	g := p.AddNodeGroup(id, 0, max, target, nil)
	return clusterstate.NodeGroupState{Group: g, Target: target}
}

func TestBalance(t *testing.T) {
	cases := []struct {
		name    string
		targets []int
		maxes   []int
		n       int
		want    map[string][2]int // id → from,to
	}{
		{name: "even split", targets: []int{2, 2}, maxes: []int{10, 10}, n: 4,
			want: map[string][2]int{"a": {2, 4}, "b": {2, 4}}},
		{name: "fill the smaller first", targets: []int{1, 4}, maxes: []int{10, 10}, n: 5,
			want: map[string][2]int{"a": {1, 5}, "b": {4, 5}}},
		{name: "max respected", targets: []int{0, 0, 0}, maxes: []int{1, 10, 10}, n: 7,
			want: map[string][2]int{"a": {0, 1}, "b": {0, 3}, "c": {0, 3}}},
		{name: "all full", targets: []int{3}, maxes: []int{3}, n: 2, want: map[string][2]int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := test.NewProvider()
			var groups []clusterstate.NodeGroupState
			for i, target := range tc.targets {
				groups = append(groups, groupState(p, string(rune('a'+i)), target, tc.maxes[i]))
			}
			got := Balance(groups, tc.n)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, inc := range got {
				w := tc.want[inc.GroupID]
				if inc.From != w[0] || inc.To != w[1] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestSimilar(t *testing.T) {
	base := func() *apiv1.Node {
		return test.BuildTemplate("a", 4000, 8*test.GiB, map[string]string{"role": "web"}).Node()
	}
	cases := []struct {
		name   string
		modify func(n *apiv1.Node)
		want   bool
	}{
		{name: "identical", modify: func(*apiv1.Node) {}, want: true},
		{name: "other hostname, zone and pool id", modify: func(n *apiv1.Node) {
			n.Labels[apiv1.LabelHostname] = "other"
			n.Labels[apiv1.LabelTopologyZone] = "nyc3"
			n.Labels["doks.digitalocean.com/node-pool-id"] = "p2"
		}, want: true},
		{name: "memory within 1.5%", modify: func(n *apiv1.Node) {
			n.Status.Capacity[apiv1.ResourceMemory] = *resourceBytes(8*test.GiB - 50*test.MiB)
			n.Status.Allocatable[apiv1.ResourceMemory] = *resourceBytes(8*test.GiB - 50*test.MiB)
		}, want: true},
		{name: "more cpu", modify: func(n *apiv1.Node) {
			n.Status.Capacity[apiv1.ResourceCPU] = *resourceMilli(8000)
		}, want: false},
		{name: "other label value", modify: func(n *apiv1.Node) { n.Labels["role"] = "db" }, want: false},
		{name: "extra label", modify: func(n *apiv1.Node) { n.Labels["gpu"] = "true" }, want: false},
		{name: "extra taint", modify: func(n *apiv1.Node) {
			n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "x", Effect: apiv1.TaintEffectNoSchedule}}
		}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.modify(b)
			if got := Similar(frameworkInfo(a), frameworkInfo(b)); got != tc.want {
				t.Fatalf("Similar = %v, want %v", got, tc.want)
			}
		})
	}
}
