package scaleup

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

func TestFilterPendingPods(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).Add(time.Hour)
	prio := func(p int32) *int32 { return &p }
	young := test.BuildPendingPod("young", 100, test.MiB, "rs")
	young.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
	annotated := test.BuildPendingPod("annotated", 100, test.MiB, "rs")
	annotated.Annotations = map[string]string{PodScaleUpDelayAnnotation: "2h"}
	// An annotation may lengthen the delay, not shorten it below the flag.
	shorter := test.BuildPendingPod("shorter", 100, test.MiB, "rs")
	shorter.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
	shorter.Annotations = map[string]string{PodScaleUpDelayAnnotation: "1s"}
	badAnnotation := test.BuildPendingPod("bad-annotation", 100, test.MiB, "rs")
	badAnnotation.Annotations = map[string]string{PodScaleUpDelayAnnotation: "soon"}
	expendable := test.BuildPendingPod("expendable", 100, test.MiB, "rs")
	expendable.Spec.Priority = prio(-100)
	important := test.BuildPendingPod("important", 100, test.MiB, "rs")
	important.Spec.Priority = prio(1000)
	scheduled := test.BuildScheduledPod("scheduled", 100, test.MiB, "rs", "n1")
	noCondition := test.BuildPod("no-condition", 100, test.MiB, "rs")
	deleting := test.BuildPendingPod("deleting", 100, test.MiB, "rs")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	plain := test.BuildPendingPod("plain", 100, test.MiB, "rs")

	opts := config.Defaults()
	opts.NewPodScaleUpDelay = 30 * time.Second
	got := FilterPendingPods([]*apiv1.Pod{young, annotated, shorter, badAnnotation, expendable, important, scheduled, noCondition, deleting, plain}, opts, now, func(string) bool { return false })
	var names []string
	for _, p := range got.Eligible {
		names = append(names, p.Name)
	}
	want := []string{"bad-annotation", "important", "plain"}
	if len(names) != len(want) {
		t.Fatalf("eligible = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("eligible = %v, want %v", names, want)
		}
	}
	if got.TooYoung != 3 || got.Expendable != 1 || got.SchedulerUnprocessed != 1 {
		t.Fatalf("tooYoung=%d expendable=%d schedulerUnprocessed=%d, want 3, 1 and 1 (no-condition)", got.TooYoung, got.Expendable, got.SchedulerUnprocessed)
	}
}

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
