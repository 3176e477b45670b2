package core

import (
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
)

// createdAt sets the creation time of every pod among objs.
func createdAt(objs []runtime.Object, at time.Time) {
	for _, o := range objs {
		if p, ok := o.(*apiv1.Pod); ok {
			p.CreationTimestamp = metav1.NewTime(at)
		}
	}
}

// Pods needing new nodes that are all younger than 2 s wait one iteration,
// as upstream's allPodsAreNew: a burst (a ReplicaSet's slow start, several
// Deployments applied together) is then sized by one decision for all its
// pods, not one per fragment the loop happened to see.
func TestVeryNewPodsWaitForTheirBurst(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	burst := pendingPods("web", 10, 500, 256*test.MiB)
	createdAt(burst, t0.Add(-time.Second))
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800), burst)...)
	h.runOnce(t0)
	if got := increases(p); len(got) != 0 {
		t.Fatalf("IncreaseSize calls = %v for pods 1 s old, want none yet", got)
	}
	h.runOnce(t0.Add(time.Second + time.Millisecond))
	if got := increases(p); !reflect.DeepEqual(got, []string{"g1+3"}) {
		t.Fatalf("IncreaseSize calls = %v once the oldest pod is 2 s old, want [g1+3]", got)
	}
}

// While very new pods wait for their burst, nothing is removed: the room
// they need is not known yet (upstream's DisableScaleDownForLoop).
func TestVeryNewPodsHoldScaleDown(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	p.AddNodeGroup("big", 0, 3, 0, test.BuildTemplate("big", 4000, 8*test.GiB, nil))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	// n1 and n2 have been unneeded for 10 minutes when a pod that fits no
	// node of g1 appears.
	huge := test.BuildPendingPod("huge", 3000, test.GiB, "")
	huge.CreationTimestamp = metav1.NewTime(t0.Add(10 * time.Minute))
	h.createPod(huge)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	if d := sdtest.Deletions(p); len(d) != 0 {
		t.Fatalf("nodes removed while a 1 s old pod waits for its scale-up: %v", d)
	}
	if got := increases(p); len(got) != 0 {
		t.Fatalf("IncreaseSize calls = %v, want none yet", got)
	}
	h.runOnce(t0.Add(10*time.Minute + 3*time.Second))
	if got := increases(p); !reflect.DeepEqual(got, []string{"big+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [big+1]", got)
	}
}

func TestAllPodsNew(t *testing.T) {
	old := test.BuildPendingPod("old", 100, test.MiB, "")
	old.CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Second))
	young := test.BuildPendingPod("young", 100, test.MiB, "")
	young.CreationTimestamp = metav1.NewTime(t0.Add(-time.Second))
	fake := test.BuildPendingPod("fake", 100, test.MiB, "")
	fake.CreationTimestamp = metav1.Time{}
	for _, tc := range []struct {
		name string
		pods []*apiv1.Pod
		want bool
	}{
		{"none", nil, false},
		{"all young", []*apiv1.Pod{young}, true},
		{"one 2 s old", []*apiv1.Pod{young, old}, false},
		{"a pod without a creation time is old", []*apiv1.Pod{young, fake}, false},
	} {
		if got := allPodsNew(tc.pods, t0); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The loop that waits for very new pods wakes when the oldest is old
// enough, not a scan interval later.
func TestVeryNewPodsWakeTheLoop(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	burst := pendingPods("web", 2, 500, 256*test.MiB)
	createdAt(burst, t0.Add(-500*time.Millisecond))
	o := testOptions()
	o.FrequentLoopsEnabled = true
	h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), burst)...)
	h.runOnce(t0)
	if got := h.a.waitInterval(t0); got != 1500*time.Millisecond {
		t.Fatalf("wait after a loop that waited for new pods = %v, want 1.5s", got)
	}
	h.runOnce(t0.Add(1500 * time.Millisecond))
	if got := h.a.waitInterval(t0.Add(1500 * time.Millisecond)); got != o.ScanInterval {
		t.Fatalf("wait after the scale-up = %v, want the scan interval", got)
	}
}
