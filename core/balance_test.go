package core

import (
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/priority"
)

// With --balance-similar-node-groups, the node count is estimated against
// the combined room of the chosen group and its similar groups, then spread
// (upstream's similar-node-group capacity threshold and balancing
// processor). Twin groups with room 1 ("a", preferred) and 9 ("b"), 4 pods
// that need a node each: +4 in one loop, a+1 b+3.
func TestBalancedScaleUpUsesSimilarGroupsRoom(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "a", min: 1, max: 2, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB, labels: map[string]string{"doks.digitalocean.com/node-pool-id": "a"}},
		groupSpec{id: "b", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB, labels: map[string]string{"doks.digitalocean.com/node-pool-id": "b"}},
	)
	cm := &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: priority.ConfigMapName, Namespace: "kube-system"},
		Data:       map[string]string{priority.ConfigMapKey: "50:\n  - ^a$\n10:\n  - ^b$\n"},
	}
	o := testOptions()
	o.BalanceSimilarNodeGroups = true
	o.ExpanderNames = []string{"priority"}
	h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), pendingPods("web", 4, 1500, test.GiB), []runtime.Object{cm})...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1", "b+3"}) {
		t.Fatalf("IncreaseSize calls = %v, want [a+1 b+3] in one loop", got)
	}
	h.runOnce(t0.Add(10 * time.Second))
	if got := increases(p); len(got) != 2 {
		t.Fatalf("a second loop scaled up again: %v", got)
	}
}
