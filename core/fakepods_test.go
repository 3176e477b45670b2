package core

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

// fakePods is a processor adding n fake pods of milliCPU each, owned by a
// CapacityBuffer named "warm".
type fakePods struct {
	n        int
	milliCPU int64
}

func (f *fakePods) Process(_ *fakepods.Context, pending []*apiv1.Pod) ([]*apiv1.Pod, error) {
	for i := 0; i < f.n; i++ {
		p := test.BuildPendingPod(fmt.Sprintf("capacity-buffer-warm-%d", i), f.milliCPU, 256*test.MiB, "")
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "autoscaling.x-k8s.io/v1beta1", Kind: "CapacityBuffer", Name: "warm", UID: "warm-uid", Controller: ptr.To(true)}}
		p.UID = types.UID(fmt.Sprintf("warm-uid-%d", i))
		p.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
		fakepods.MarkFake(p)
		pending = append(pending, p)
	}
	return pending, nil
}

func (f *fakePods) CleanUp() {}

// Fake pods that fit no node cause a scale-up like real ones; the events
// about them go to their owner, never to a Pod.
func TestFakePodsScaleUpWithoutPodEvents(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800))...)
	h.a.AddPodListProcessor(&fakePods{n: 2, milliCPU: 1000})
	h.runOnce(t0)
	// 2000m nodes: both 1000m pods fit one new node.
	if got := increases(p); !reflect.DeepEqual(got, []string{"g1+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [g1+1]", got)
	}
	ev := h.events()
	if n := countEvents(ev, "kind=Pod"); n != 0 {
		t.Errorf("events name a pod: %v", ev)
	}
	if n := countEvents(ev, "TriggeredScaleUp fake pod capacity-buffer-warm-0: pod triggered scale-up: [{g1 1->2 (max: 10)}] involvedObject{kind=CapacityBuffer"); n != 1 {
		t.Errorf("no TriggeredScaleUp event on the buffer: %v", ev)
	}
	for _, a := range h.kube.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("API call on pods for fake pods: %s %s", a.GetVerb(), a.GetSubresource())
		}
	}
}

// An empty node stays while a fake pod needs its room, and goes after the
// unneeded time once the processor stops asking for it.
func TestFakePodsKeepTheRoomTheyNeed(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	h := newHarness(t, testOptions(), p, objs...)
	buffer := &fakePods{n: 1, milliCPU: 1500}
	h.a.AddPodListProcessor(buffer)
	// n0 is busy (1500m of 2000m); the light pod moves to n0 or n2; the
	// 1500m fake pod fits n1 or n2 only, so one of them must stay.
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if d := sdtest.Deletions(p); len(d) != 1 {
		t.Fatalf("DeleteNodes calls = %v, want one node removed and one kept for the fake pod", d)
	}
	if got := increases(p); len(got) != 0 {
		t.Fatalf("scaled up %v: the fake pod fits an existing node", got)
	}
	for _, e := range h.evicts.Evictions() {
		if strings.Contains(e, "capacity-buffer") {
			t.Errorf("evicted a fake pod: %v", h.evicts.Evictions())
		}
	}
	buffer.n = 0
	h.runOnce(t0.Add(12 * time.Minute))
	h.runOnce(t0.Add(23 * time.Minute))
	d := sdtest.Deletions(p)
	sort.Strings(d)
	if len(d) != 2 {
		t.Fatalf("DeleteNodes calls = %v, want the kept node removed once the buffer is gone", d)
	}
}
