package core

import (
	"reflect"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// A node whose removal started (ToBeDeleted) but whose deletion the cloud
// has not taken (its instance is listed, not deleting: the delete call
// failed, or has not been sent) still counts against --max-nodes-total:
// if the removal fails, the node stays beside whatever was bought in its
// place. Once the cloud drops it from the target, its room is free.
func TestNodeBeingRemovedCountsAgainstMaxNodesUntilTheCloudTakesIt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken bool // the cloud dropped the instance from the target
		want  []string
	}{
		{"deletion not taken", false, nil},
		{"deletion taken", true, []string{"g1+1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 5, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
			leaving := nodes[1].(*apiv1.Node)
			leaving.Spec.Taints = []apiv1.Taint{{Key: clusterstate.ToBeDeletedTaint, Value: "1700000000", Effect: apiv1.TaintEffectNoSchedule}}
			if tc.taken {
				if err := p.Group("g1").DeleteNodes([]*apiv1.Node{leaving}); err != nil {
					t.Fatal(err)
				}
			}
			o := testOptions()
			o.MaxNodesTotal = 2
			objs := join(nodes[:1], fill(nodes[:1], 1800), pendingPods("web", 1, 1500, 256*test.MiB))
			h := newHarness(t, o, p, append(objs, runtime.Object(leaving))...)
			h.runOnce(t0)
			if got := increases(p); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IncreaseSize calls = %v, want %v", got, tc.want)
			}
		})
	}
}
