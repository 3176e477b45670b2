package core

import (
	"reflect"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

// booking is a processor that puts room-holding fake pods before the
// pending ones, as a ProvisioningRequest's booking does.
type booking struct{ pods []*apiv1.Pod }

func (b booking) Process(_ *fakepods.Context, pending []*apiv1.Pod) ([]*apiv1.Pod, error) {
	return append(append([]*apiv1.Pod{}, b.pods...), pending...), nil
}
func (booking) CleanUp() {}

// Booked room is not given to pending pods, and a booking that fits
// nowhere asks for no node.
func TestHoldsRoomOnlyPods(t *testing.T) {
	held := func(milliCPU int64) *apiv1.Pod {
		p := test.BuildPendingPod("booked", milliCPU, 256*test.MiB, "")
		fakepods.MarkHoldsRoomOnly(p)
		return p
	}
	cases := []struct {
		name    string
		book    []*apiv1.Pod
		pending bool
		want    []string
	}{
		{name: "pending pod fits the free room", pending: true, want: nil},
		{name: "booked room is not given away: the pending pod scales up", book: []*apiv1.Pod{held(800)}, pending: true, want: []string{"g1+1"}},
		{name: "a booking that fits nowhere causes no scale-up", book: []*apiv1.Pod{held(1500)}, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// One 2-cpu node with 1 cpu free; the pending pod asks 800m.
			p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
			objs := join(nodes, fill(nodes, 1000))
			if tc.pending {
				objs = join(objs, pendingPods("web", 1, 800, 256*test.MiB))
			}
			h := newHarness(t, testOptions(), p, objs...)
			h.a.AddPodListProcessor(booking{pods: tc.book})
			h.runOnce(t0)
			if got := increases(p); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IncreaseSize calls = %v, want %v", got, tc.want)
			}
		})
	}
}
