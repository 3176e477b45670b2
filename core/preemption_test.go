package core

import (
	"reflect"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

func nominated(name string, milliCPU int64, node string) *apiv1.Pod {
	p := test.BuildPendingPod(name, milliCPU, 256*test.MiB, "")
	p.Status.NominatedNodeName = node
	return p
}

// A pending pod the scheduler nominated for a node (it preempts lower
// priority pods there) causes no scale-up; a pod nominated for a node that
// is gone is an ordinary pending pod (upstream's filter-out-expendable pod
// list processor).
func TestNominatedPodsDoNotScaleUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		node string
		want []string
	}{
		{"nominated node exists", "g1-n0", nil},
		{"nominated node gone", "g1-gone", []string{"g1+1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
			h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800), []runtime.Object{nominated("preemptor", 1500, tc.node)})...)
			h.runOnce(t0)
			if got := increases(p); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IncreaseSize calls = %v, want %v", got, tc.want)
			}
			if tc.want == nil {
				if n := countEvents(h.events(), "NotTriggerScaleUp"); n != 0 {
					t.Fatalf("a pod waiting for preemption got %d NotTriggerScaleUp events", n)
				}
			}
		})
	}
}

// The nominated pod is placed on its node in the simulation, though it
// does not fit there yet (it preempts): the room it takes there is not
// offered to other pending pods. base's node has 1000m free; the preemptor
// needs 1200m; two other pods of 600m then need a 1000m node each.
func TestNominatedPodTakesRoomOnItsNode(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "base", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "small", min: 0, max: 5, nodes: 0, milliCPU: 1000, mem: 4 * test.GiB},
	)
	objs := join(nodes, fill(nodes, 1000), []runtime.Object{nominated("preemptor", 1200, "base-n0")}, pendingPods("other", 2, 600, 256*test.MiB))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"small+2"}) {
		t.Fatalf("IncreaseSize calls = %v, want [small+2]: neither 600m pod fits beside the preemptor", got)
	}
}

// The pod-event trigger does not start an iteration at once for a pod
// waiting for preemption; it does for a pod nominated for a node that is
// gone.
func TestNominatedPodDoesNotNotifyTrigger(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	h := newHarness(t, testOptions(), p, nodes...)
	notified := func() bool {
		h.a.trigger.mu.Lock()
		defer h.a.trigger.mu.Unlock()
		return !h.a.trigger.first.IsZero()
	}
	preemptor, orphan := nominated("preemptor", 100, "g1-n0"), nominated("orphan", 100, "g1-gone")
	if h.a.wantsNode(preemptor) || !h.a.wantsNode(orphan) {
		t.Fatalf("wantsNode: preemptor %v, orphan %v; want false, true", h.a.wantsNode(preemptor), h.a.wantsNode(orphan))
	}
	h.createPod(preemptor)
	if notified() {
		t.Fatal("a pod waiting for preemption notified the trigger")
	}
	h.createPod(orphan)
	h.waitCache("trigger notification", notified)
}
