package scaleup

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// --balancing-ignore-label, --balancing-label and the difference ratios
// change which node groups are similar, as upstream's comparators.
func TestSimilarityFlags(t *testing.T) {
	base := func() *apiv1.Node {
		return test.BuildTemplate("a", 4000, 8*test.GiB, map[string]string{"role": "web", "team": "a"}).Node()
	}
	cases := []struct {
		name   string
		flags  func(o *config.AutoscalingOptions)
		modify func(n *apiv1.Node)
		want   bool
	}{
		{name: "a user's pool label differs", flags: func(*config.AutoscalingOptions) {},
			modify: func(n *apiv1.Node) { n.Labels["team"] = "b" }, want: false},
		{name: "the same, ignored with --balancing-ignore-label", flags: func(o *config.AutoscalingOptions) { o.BalancingExtraIgnoredLabels = []string{"team"} },
			modify: func(n *apiv1.Node) { n.Labels["team"] = "b" }, want: true},
		{name: "--balancing-ignore-label leaves other labels compared", flags: func(o *config.AutoscalingOptions) { o.BalancingExtraIgnoredLabels = []string{"team"} },
			modify: func(n *apiv1.Node) { n.Labels["role"] = "db" }, want: false},
		{name: "--balancing-label: same value, nothing else compared", flags: func(o *config.AutoscalingOptions) { o.BalancingLabels = []string{"role"} },
			modify: func(n *apiv1.Node) {
				n.Labels["team"] = "b"
				n.Status.Capacity[apiv1.ResourceCPU] = *resourceMilli(8000)
				n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "x", Effect: apiv1.TaintEffectNoSchedule}}
			}, want: true},
		{name: "--balancing-label: other value", flags: func(o *config.AutoscalingOptions) { o.BalancingLabels = []string{"role", "team"} },
			modify: func(n *apiv1.Node) { n.Labels["team"] = "b" }, want: false},
		{name: "--balancing-label: missing on one", flags: func(o *config.AutoscalingOptions) { o.BalancingLabels = []string{"zone-class"} },
			modify: func(n *apiv1.Node) { n.Labels["zone-class"] = "x" }, want: false},
		{name: "memory 5% smaller at the default ratios", flags: func(*config.AutoscalingOptions) {},
			modify: func(n *apiv1.Node) {
				n.Status.Capacity[apiv1.ResourceMemory] = *resourceBytes(8*test.GiB - 400*test.MiB)
			}, want: false},
		{name: "the same with --memory-difference-ratio=0.1", flags: func(o *config.AutoscalingOptions) { o.MaxCapacityMemoryDifferenceRatio = 0.1 },
			modify: func(n *apiv1.Node) {
				n.Status.Capacity[apiv1.ResourceMemory] = *resourceBytes(8*test.GiB - 400*test.MiB)
			}, want: true},
		{name: "allocatable cpu 1.25% smaller with --max-allocatable-difference-ratio=0.01", flags: func(o *config.AutoscalingOptions) { o.MaxAllocatableDifferenceRatio = 0.01 },
			modify: func(n *apiv1.Node) { n.Status.Allocatable[apiv1.ResourceCPU] = *resourceMilli(3950) }, want: false},
		{name: "free cpu 1.25% smaller at the default ratios", flags: func(*config.AutoscalingOptions) {},
			modify: func(n *apiv1.Node) { n.Status.Allocatable[apiv1.ResourceCPU] = *resourceMilli(3950) }, want: true},
		{name: "the same with --max-free-difference-ratio=0.01", flags: func(o *config.AutoscalingOptions) {
			o.MaxFreeDifferenceRatio = 0.01
			o.MaxAllocatableDifferenceRatio = 0.5
		}, modify: func(n *apiv1.Node) { n.Status.Allocatable[apiv1.ResourceCPU] = *resourceMilli(3950) }, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := config.Defaults()
			tc.flags(&o)
			a, b := base(), base()
			tc.modify(b)
			if got := NewSimilarity(o).Similar(frameworkInfo(a), frameworkInfo(b)); got != tc.want {
				t.Fatalf("Similar = %v, want %v", got, tc.want)
			}
		})
	}
}
