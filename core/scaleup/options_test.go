package scaleup

import (
	"fmt"
	"reflect"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

func uidPod(name string) *apiv1.Pod {
	p := test.BuildPendingPod(name, 100, test.MiB, "rs")
	p.UID = types.UID("uid-" + name)
	return p
}

func TestUncoveredGroups(t *testing.T) {
	a1, a2, b1, c1 := uidPod("a1"), uidPod("a2"), uidPod("b1"), uidPod("c1")
	egs := []simulator.PodEquivalenceGroup{{Pods: []*apiv1.Pod{a1, a2}}, {Pods: []*apiv1.Pod{b1}}, {Pods: []*apiv1.Pod{c1}}}
	p := test.NewProvider()
	g1 := p.AddNodeGroup("g1", 0, 10, 0, nil)
	g2 := p.AddNodeGroup("g2", 0, 10, 0, nil)
	cases := []struct {
		name    string
		options []expander.Option
		want    []int
	}{
		{"no options: nobody helped", nil, []int{0, 1, 2}},
		{"one pod of a group placed: the group is helped", []expander.Option{{NodeGroup: g1, Pods: []*apiv1.Pod{a2}}}, []int{1, 2}},
		{"options together cover all", []expander.Option{{NodeGroup: g1, Pods: []*apiv1.Pod{a1, b1}}, {NodeGroup: g2, Pods: []*apiv1.Pod{c1}}}, nil},
		{"option placing no pod", []expander.Option{{NodeGroup: g1}}, []int{0, 1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := uncoveredGroups(egs, c.options); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("uncoveredGroups = %v, want %v", got, c.want)
			}
		})
	}
}

func TestWithoutFailed(t *testing.T) {
	p := test.NewProvider()
	opts := []expander.Option{
		{NodeGroup: p.AddNodeGroup("a", 0, 10, 0, nil)},
		{NodeGroup: p.AddNodeGroup("b", 0, 10, 0, nil)},
		{NodeGroup: p.AddNodeGroup("c", 0, 10, 0, nil)},
	}
	cases := []struct {
		name   string
		failed map[string]bool
		want   string
	}{
		{"nothing failed", map[string]bool{}, "a,b,c"},
		{"the best failed", map[string]bool{"b": true}, "a,c"},
		{"a balanced plan failed in two groups", map[string]bool{"a": true, "c": true}, "b"},
		{"all failed", map[string]bool{"a": true, "b": true, "c": true}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := expander.GroupIDs(withoutFailed(opts, c.failed)); got != c.want {
				t.Fatalf("withoutFailed = %q, want %q", got, c.want)
			}
		})
	}
}

func TestChoice(t *testing.T) {
	p := test.NewProvider()
	a := expander.Option{NodeGroup: p.AddNodeGroup("a", 0, 10, 0, nil)}
	b := expander.Option{NodeGroup: p.AddNodeGroup("b", 0, 10, 0, nil)}
	many := []expander.Option{a}
	for i := 0; i < 5; i++ {
		many = append(many, expander.Option{NodeGroup: p.AddNodeGroup(fmt.Sprintf("c%d", i), 0, 10, 0, nil)})
	}
	many = append(many, b)
	cases := []struct {
		name    string
		best    expander.Option
		options []expander.Option
		want    string
	}{
		{"single option", a, []expander.Option{a}, "the only node group that could help"},
		{"expander picked", b, []expander.Option{a, b}, "expander chose b among 2 options: a,b"},
		{"many options, five listed", b, many, "expander chose b among 7 options: a,c0,c1,c2,c3 and 2 more"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := choice(c.best, c.options); got != c.want {
				t.Fatalf("choice = %q, want %q", got, c.want)
			}
		})
	}
}
