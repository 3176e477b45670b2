package waste

import (
	"fmt"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
)

// option is nodes nodes of a DOKS-like size (allocatable below capacity by
// a fixed slice per node) for pods of 500m / 1 GiB.
func option(p *test.Provider, id string, vcpus int64, nodes, pods int) expander.Option {
	tmpl := test.BuildTemplate(id, vcpus*1000, vcpus*2*test.GiB, nil)
	n := tmpl.Node()
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	n.Status.Allocatable[apiv1.ResourceCPU] = *resource.NewMilliQuantity(vcpus*1000-200, resource.DecimalSI)
	n.Status.Allocatable[apiv1.ResourceMemory] = *resource.NewQuantity(vcpus*2*test.GiB-2*test.GiB, resource.BinarySI)
	var ps []*apiv1.Pod
	for i := range pods {
		ps = append(ps, test.BuildPendingPod(fmt.Sprintf("%s-p%d", id, i), 500, test.GiB, "rs"))
	}
	return expander.Option{NodeGroup: p.AddNodeGroup(id, 0, 10, 0, tmpl), NodeCount: nodes, Pods: ps, NodeInfo: tmpl}
}

func TestLeastWaste(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options func(p *test.Provider) []expander.Option
		want    string
	}{
		{"the same capacity ties whatever the allocatable; fewer, larger nodes win the tie",
			func(p *test.Provider) []expander.Option {
				return []expander.Option{option(p, "s-4vcpu", 4, 4, 12), option(p, "s-8vcpu", 8, 2, 12)}
			}, "s-8vcpu"},
		{"less capacity unused wins", func(p *test.Provider) []expander.Option {
			return []expander.Option{option(p, "s-2vcpu", 2, 1, 3), option(p, "s-8vcpu", 8, 1, 3)}
		}, "s-2vcpu"},
		{"the same capacity and count: both kept", func(p *test.Provider) []expander.Option {
			return []expander.Option{option(p, "a", 4, 2, 6), option(p, "b", 4, 2, 6)}
		}, "a,b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			for _, o := range NewFilter().BestOptions(tc.options(test.NewProvider())) {
				ids = append(ids, o.NodeGroup.Id())
			}
			if got := strings.Join(ids, ","); got != tc.want {
				t.Fatalf("best %s, want %s", got, tc.want)
			}
		})
	}
}
