package core

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/actuation"
)

// delays records each wait after tainting; during the first, run happens
// (what the cluster does in the race between plan and taint).
type delays struct {
	mu   sync.Mutex
	seen []time.Duration
	run  func()
}

func (d *delays) option() actuation.Option {
	return actuation.OnDelayAfterTaint(func(delay time.Duration) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.seen) == 0 && d.run != nil {
			d.run()
		}
		d.seen = append(d.seen, delay)
	})
}

func (d *delays) all() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

func deletedNode(p *test.Provider, name string) bool {
	for _, d := range sdtest.Deletions(p) {
		if slices.Contains(strings.Split(strings.SplitN(d, ":", 2)[1], ","), name) {
			return true
		}
	}
	return false
}

// An empty node is tainted, then --node-delete-delay-after-taint passes
// before it is checked for pods and deleted: a pod the scheduler bound in
// that time (it had not seen the taint yet) keeps the node, which is given
// back.
func TestDelayAfterTaintSeesPodBoundInTheRace(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	o := testOptions()
	o.NodeDeleteDelayAfterTaint = 30 * time.Millisecond
	o.MaxDrainParallelism = 0 // the empty node only
	var h *harness
	d := &delays{run: func() {
		if _, err := h.kube.CoreV1().Pods("default").Create(h.ctx, test.BuildScheduledPod("racer", 100, test.MiB, "rs-racer", "g1-n2"), metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	}}
	h = newHarnessWith(t, o, p, []actuation.Option{d.option()}, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	if got := d.all(); len(got) != 1 || got[0] != 30*time.Millisecond {
		t.Fatalf("waits after taint = %v, want one of 30ms", got)
	}
	if deletedNode(p, "g1-n2") {
		t.Fatalf("g1-n2 deleted although a pod was bound to it during the delay after taint: %v", sdtest.Deletions(p))
	}
	if hasTaint(h.node("g1-n2"), clusterstate.ToBeDeletedTaint) {
		t.Error("g1-n2 kept its ToBeDeleted taint")
	}
}

// The default wait is upstream's 5 s, for drains too; with
// --dynamic-node-delete-delay-after-taint-enabled it is twice the time the
// taint took to reach the node informer instead.
func TestDelayAfterTaintDefaultAndDynamic(t *testing.T) {
	if d := config.Defaults().NodeDeleteDelayAfterTaint; d != 5*time.Second {
		t.Fatalf("default --node-delete-delay-after-taint = %v, want upstream's 5s", d)
	}
	p, objs, _ := scaleDownFixture(1)
	o := testOptions()
	o.NodeDeleteDelayAfterTaint = 5 * time.Second
	o.DynamicNodeDeleteDelayAfterTaintEnabled = true
	d := &delays{}
	h := newHarnessWith(t, o, p, []actuation.Option{d.option()}, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	got := d.all()
	if len(got) != 2 {
		t.Fatalf("waits after taint = %v, want one for the empty node and one for the drain", got)
	}
	for _, w := range got {
		if w <= 0 || w >= 5*time.Second {
			t.Errorf("dynamic wait after taint = %v, want twice the measured latency (well under the static 5s)", w)
		}
	}
	if !deletedNode(p, "g1-n1") || !deletedNode(p, "g1-n2") {
		t.Errorf("deletions = %v, want g1-n1 and g1-n2", sdtest.Deletions(p))
	}
}

func withDelayDeletion(objs []runtime.Object, node string) {
	for _, o := range objs {
		if n, ok := o.(*apiv1.Node); ok && n.Name == node {
			n.Annotations = map[string]string{actuation.DelayDeletionAnnotationPrefix + "backup": "running"}
		}
	}
}

// A node carrying a delay-deletion.cluster-autoscaler.kubernetes.io/
// annotation is deleted only once the annotation is gone.
func TestDelayDeletionAnnotationHoldsDeletion(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	withDelayDeletion(objs, "g1-n2")
	o := testOptions()
	o.NodeDeletionDelayTimeout = time.Hour
	h := newAsyncHarness(t, o, p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	// Held: the removal is in flight, the node not deleted.
	for range 20 {
		if deletedNode(p, "g1-n2") {
			t.Fatal("g1-n2 deleted while its delay-deletion annotation was on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := h.node("g1-n2")
	n.Annotations = nil
	h.updateNode(n)
	h.a.actuator.Wait()
	if !deletedNode(p, "g1-n2") {
		t.Fatalf("g1-n2 not deleted once its annotation went: %v", sdtest.Deletions(p))
	}
}

// Past --node-deletion-delay-timeout the node goes anyway, as upstream.
func TestDelayDeletionAnnotationTimesOut(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	withDelayDeletion(objs, "g1-n2")
	o := testOptions()
	o.NodeDeletionDelayTimeout = 50 * time.Millisecond
	h := newHarness(t, o, p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	if !deletedNode(p, "g1-n2") {
		t.Fatalf("g1-n2 not deleted after --node-deletion-delay-timeout: %v", sdtest.Deletions(p))
	}
}
