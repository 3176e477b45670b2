package core

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// scrape registers the autoscaler's metrics (with the per node group ones)
// in a fresh registry and returns a reader of one series' value.
func scrape(t *testing.T) func(name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics.RegisterAll(reg, true)
	return func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "cluster_autoscaler_"+name {
				continue
			}
		series:
			for _, m := range mf.GetMetric() {
				if len(m.GetLabel()) != len(labels) {
					continue
				}
				for _, lp := range m.GetLabel() {
					if labels[lp.GetName()] != lp.GetValue() {
						continue series
					}
				}
				if m.Counter != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
}

// lateGroupFixture returns a cluster where "a" (preferred) gets a+1 for 2 pending pods at t0; its
// node never registers.
func lateGroupFixture(t *testing.T) (*test.Provider, *harness) {
	t.Helper()
	p, h := preferAOverB(t, 1, 2, 1000)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1"}) {
		t.Fatalf("IncreaseSize calls = %v", got)
	}
	h.events()
	return p, h
}

// A scale-up whose node does not register within --max-node-provision-time:
// ScaleUpTimedOut and DeleteUnregistered on the status ConfigMap, with
// upstream's messages; failed_node_creations_total{reason=timeout},
// old_unregistered_nodes_removed_count, and the group's backoff in
// node_group_backoff_status.
func TestScaleUpTimeoutEventsAndMetrics(t *testing.T) {
	value := scrape(t)
	failedBefore := max(0, value("failed_node_creations_total", map[string]string{"reason": "timeout"}))
	removedBefore := value("old_unregistered_nodes_removed_count", map[string]string{})
	_, h := lateGroupFixture(t)
	h.runOnce(t0.Add(16 * time.Minute))
	ev := h.events()
	for _, want := range []string{
		"Warning ScaleUpTimedOut Nodes added to group a failed to register within 16m0s involvedObject{kind=ConfigMap",
		"Normal DeleteUnregistered Removed unregistered node test://a-new-1 involvedObject{kind=ConfigMap",
	} {
		if countEvents(ev, want) != 1 {
			t.Errorf("no event %q in %v", want, ev)
		}
	}
	if got := value("failed_node_creations_total", map[string]string{"reason": "timeout"}) - failedBefore; got != 1 {
		t.Errorf("failed_node_creations_total{reason=timeout} grew by %v, want 1", got)
	}
	if got := value("old_unregistered_nodes_removed_count", map[string]string{}) - removedBefore; got != 1 {
		t.Errorf("old_unregistered_nodes_removed_count grew by %v, want 1", got)
	}
	if got := value("node_group_backoff_status", map[string]string{"node_group": "a", "reason": "timeout"}); got != 1 {
		t.Errorf("node_group_backoff_status{a,timeout} = %v, want 1", got)
	}
	if got := value("node_group_backoff_status", map[string]string{"node_group": "b", "reason": ""}); got != 0 {
		t.Errorf("node_group_backoff_status{b,\"\"} = %v, want 0", got)
	}
	if got := value("node_group_healthiness", map[string]string{"node_group": "b"}); got != 1 {
		t.Errorf("node_group_healthiness{b} = %v, want 1", got)
	}
}

func TestDeleteUnregisteredFailedEvent(t *testing.T) {
	p, h := lateGroupFixture(t)
	p.Group("a").InjectError("DeleteNodes", errString("droplet is locked"))
	h.runOnce(t0.Add(16 * time.Minute))
	want := "Warning DeleteUnregisteredFailed Failed to remove node test://a-new-1: droplet is locked involvedObject{kind=ConfigMap"
	if ev := h.events(); countEvents(ev, want) != 1 {
		t.Fatalf("no event %q in %v", want, ev)
	}
}

// --max-nodes-total bounding a scale-up, or stopping it, records
// MaxNodesTotalReached on the status ConfigMap.
func TestMaxNodesTotalReachedEvent(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want []string
	}{{3, []string{"g1+2"}}, {1, nil}} {
		p, objs := scaleUpFixture(10)
		o := testOptions()
		o.MaxNodesTotal = tc.max
		h := newHarness(t, o, p, objs...)
		h.runOnce(t0)
		if got := increases(p); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("max %d: IncreaseSize calls = %v, want %v", tc.max, got, tc.want)
		}
		want := "Warning MaxNodesTotalReached Max total nodes in cluster reached: " + map[int]string{3: "3", 1: "1"}[tc.max] + " involvedObject{kind=ConfigMap"
		if ev := h.events(); countEvents(ev, want) != 1 {
			t.Errorf("max %d: no event %q in %v", tc.max, want, ev)
		}
	}
	// Not bounded by it: no event.
	p, objs := scaleUpFixture(10)
	o := testOptions()
	o.MaxNodesTotal = 10
	h := newHarness(t, o, p, objs...)
	h.runOnce(t0)
	if n := countEvents(h.events(), "MaxNodesTotalReached"); n != 0 {
		t.Errorf("MaxNodesTotalReached with room to spare: %d", n)
	}
}

// A failed IncreaseSize counts the nodes it asked for in
// failed_node_creations_total{reason=cloudProviderError}.
func TestFailedNodeCreationsOnIncreaseSizeError(t *testing.T) {
	value := scrape(t)
	before := max(0, value("failed_node_creations_total", map[string]string{"reason": "cloudProviderError"}))
	p, objs := scaleUpFixture(10)
	p.Group("g1").InjectError("IncreaseSize", errString("quota exceeded"))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := value("failed_node_creations_total", map[string]string{"reason": "cloudProviderError"}) - before; got != 3 {
		t.Fatalf("failed_node_creations_total{reason=cloudProviderError} grew by %v, want 3", got)
	}
}

// unremovable_nodes_count{reason} counts each loop's unremovable nodes by
// upstream's reason numbers (11 NotUnderutilized, 4 NotUnneededLongEnough,
// 1 ScaleDownDisabledAnnotation), and a reason no node has any more drops
// to 0.
func TestUnremovableNodesCountByReason(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	protectFromScaleDown(objs, "g1-n2")
	h := newHarness(t, testOptions(), p, objs...)
	read := scrape(t)
	count := func(reason string) float64 {
		return read("unremovable_nodes_count", map[string]string{"reason": reason})
	}
	h.runOnce(t0)
	if got := [3]float64{count("11"), count("4"), count("1")}; got != [3]float64{1, 1, 1} {
		t.Fatalf("after the first loop, unremovable by reason 11/4/1 = %v, want busy n0, n1 not unneeded long enough, annotated n2: [1 1 1]", got)
	}
	h.runOnce(t0.Add(11 * time.Minute)) // n1 is drained
	if got := [3]float64{count("11"), count("4"), count("1")}; got != [3]float64{1, 0, 1} {
		t.Fatalf("after n1's removal, unremovable by reason 11/4/1 = %v, want [1 0 1]", got)
	}
}

// A problem the provider reports (a token without tag:read, say) is the
// status ConfigMap's message while it lasts, and one warning event on the
// ConfigMap when it appears, not one per loop.
func TestProviderProblemInStatusAndEvent(t *testing.T) {
	const problem = "the DigitalOcean API token most likely lacks the tag:read scope"
	p, objs := scaleUpFixture(10)
	p.SetProblems(problem)
	h := newHarness(t, testOptions(), p, objs...)
	status := func() string {
		t.Helper()
		cm, err := h.kube.CoreV1().ConfigMaps("kube-system").Get(h.ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["status"]
	}
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Second))
	if s := status(); !strings.Contains(s, "message: "+problem) {
		t.Errorf("status ConfigMap has no message naming the problem:\n%s", s)
	}
	ev := h.events()
	if n := countEvents(ev, "Warning CloudProviderProblem "+problem); n != 1 {
		t.Errorf("CloudProviderProblem events = %d in two loops, want 1: %v", n, ev)
	}
	p.SetProblems()
	h.runOnce(t0.Add(20 * time.Second))
	if s := status(); strings.Contains(s, problem) {
		t.Errorf("the problem is gone but the status ConfigMap still shows it:\n%s", s)
	}
}

// The status ConfigMap is written with the client given for it, so that its
// write each loop does not wait behind the soft taints and drains for a
// token of the autoscaler's own client (--kube-client-qps).
func TestStatusWrittenWithItsOwnClient(t *testing.T) {
	p, objs := scaleUpFixture(10)
	h := newHarness(t, testOptions(), p, objs...)
	statusKube := fake.NewClientset()
	h.a.status.kube = statusKube
	h.runOnce(t0)
	if _, err := statusKube.CoreV1().ConfigMaps("kube-system").Get(h.ctx, "cluster-autoscaler-status", metav1.GetOptions{}); err != nil {
		t.Fatalf("status ConfigMap not written with the status client: %v", err)
	}
	if _, err := h.kube.CoreV1().ConfigMaps("kube-system").Get(h.ctx, "cluster-autoscaler-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("status ConfigMap written with the autoscaler's own client too (get: %v)", err)
	}
}
