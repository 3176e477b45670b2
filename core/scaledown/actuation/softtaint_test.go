package actuation

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

func softTaintNodes(prefix string, n int, taints ...apiv1.Taint) []*apiv1.Node {
	var out []*apiv1.Node
	for i := range n {
		out = append(out, &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, i)}, Spec: apiv1.NodeSpec{Taints: slices.Clone(taints)}})
	}
	return out
}

func objects(groups ...[]*apiv1.Node) []runtime.Object {
	var out []runtime.Object
	for _, g := range groups {
		for _, n := range g {
			out = append(out, n.DeepCopy())
		}
	}
	return out
}

func softTainted(t *testing.T, kube *fake.Clientset, name string) bool {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range n.Spec.Taints {
		if tt.Key == clusterstate.DeletionCandidateTaint {
			if tt.Effect != apiv1.TaintEffectPreferNoSchedule {
				t.Errorf("node %s: soft taint effect %s, want PreferNoSchedule", name, tt.Effect)
			}
			return true
		}
	}
	return false
}

// At most --max-bulk-soft-taint-count nodes are tainted or untainted per
// pass, the needed nodes first; the rest wait for the next pass. Nodes
// being deleted are left alone.
func TestUpdateSoftTaintsWithinCount(t *testing.T) {
	candidate := apiv1.Taint{Key: clusterstate.DeletionCandidateTaint, Value: "1", Effect: apiv1.TaintEffectPreferNoSchedule}
	toBeDeleted := apiv1.Taint{Key: clusterstate.ToBeDeletedTaint, Value: "1", Effect: apiv1.TaintEffectNoSchedule}
	unneeded := softTaintNodes("unneeded-", 12)
	needed := softTaintNodes("needed-", 2, candidate)
	deleting := softTaintNodes("deleting-", 1, toBeDeleted, candidate)
	kube := fake.NewClientset(objects(unneeded, needed, deleting)...)
	clock := func() time.Time { return time.Unix(0, 0) }

	res := UpdateSoftTaints(context.Background(), kube, unneeded, append(needed, deleting...), SoftTaintBudget{Count: 10, Time: 3 * time.Second}, clock)
	if len(res.Untainted) != 2 || len(res.Tainted) != 8 || res.Skipped != 4 || len(res.Errors) != 0 {
		t.Fatalf("first pass: untainted %v, tainted %v, skipped %d, errors %v; want 2 untainted, 8 tainted, 4 skipped", res.Untainted, res.Tainted, res.Skipped, res.Errors)
	}
	for _, n := range needed {
		if softTainted(t, kube, n.Name) {
			t.Errorf("needed node %s kept its soft taint", n.Name)
		}
	}
	if !softTainted(t, kube, "deleting-0") {
		t.Error("the soft taint of a node being deleted was touched")
	}
	for i, n := range unneeded {
		if got := softTainted(t, kube, n.Name); got != (i < 8) {
			t.Errorf("unneeded node %s soft-tainted = %v after the first pass", n.Name, got)
		}
	}

	// The next pass sees the nodes as the informer would: tainted ones
	// carry the taint and are not counted again.
	for i := range unneeded {
		unneeded[i], _ = kube.CoreV1().Nodes().Get(context.Background(), unneeded[i].Name, metav1.GetOptions{})
	}
	res = UpdateSoftTaints(context.Background(), kube, unneeded, nil, SoftTaintBudget{Count: 10, Time: 3 * time.Second}, clock)
	if len(res.Tainted) != 4 || res.Skipped != 0 {
		t.Fatalf("second pass: tainted %v, skipped %d; want the 4 left", res.Tainted, res.Skipped)
	}
}

// No call starts once --max-bulk-soft-taint-time has passed since the
// pass began.
func TestUpdateSoftTaintsWithinTime(t *testing.T) {
	unneeded := softTaintNodes("unneeded-", 5)
	kube := fake.NewClientset(objects(unneeded)...)
	// Every reading of the clock is a second later than the one before.
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	res := UpdateSoftTaints(context.Background(), kube, unneeded, nil, SoftTaintBudget{Count: 10, Time: 3 * time.Second}, clock)
	if len(res.Tainted) != 2 || res.Skipped != 3 {
		t.Fatalf("tainted %v, skipped %d; want 2 tainted (at +1s and +2s), 3 skipped", res.Tainted, res.Skipped)
	}
}

// A pass's calls overlap, so that a pass takes about one round trip to the
// API server, not one per node. (Over HTTP: the fake clientset runs one
// call at a time.)
func TestUpdateSoftTaintsCallsOverlap(t *testing.T) {
	unneeded := softTaintNodes("unneeded-", softTaintWorkers)
	for _, n := range unneeded {
		n.ResourceVersion = "1"
	}
	var (
		mu                sync.Mutex
		inFlight, maxSeen int
		all               = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || !strings.HasPrefix(r.URL.Path, "/api/v1/nodes/") {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		mu.Lock()
		inFlight++
		maxSeen = max(maxSeen, inFlight)
		if inFlight == softTaintWorkers {
			close(all)
		}
		mu.Unlock()
		// Each call waits for the others, or gives up after a while.
		select {
		case <-all:
		case <-time.After(2 * time.Second):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, r.Body) // the node as written
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 100, Burst: 100, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	res := UpdateSoftTaints(context.Background(), kube, unneeded, nil, SoftTaintBudget{Count: 10, Time: time.Minute}, time.Now)
	if len(res.Tainted) != softTaintWorkers || len(res.Errors) != 0 {
		t.Fatalf("tainted %v, errors %v; want all %d", res.Tainted, res.Errors, softTaintWorkers)
	}
	if maxSeen != softTaintWorkers {
		t.Errorf("at most %d calls were in flight at once, want %d", maxSeen, softTaintWorkers)
	}
}

// --dynamic-node-delete-delay-after-taint-enabled: the delay is twice the
// longest taint latency measured over the past hour.
func TestTaintLatenciesKeepTheLongestOfThePastHour(t *testing.T) {
	var l latencies
	t0 := time.Unix(1_700_000_000, 0)
	if got := l.add(t0, 300*time.Millisecond); got != 300*time.Millisecond {
		t.Fatalf("first measurement: longest = %v", got)
	}
	if got := l.add(t0.Add(30*time.Minute), 100*time.Millisecond); got != 300*time.Millisecond {
		t.Fatalf("within the hour: longest = %v, want the earlier 300ms", got)
	}
	if got := l.add(t0.Add(time.Hour), 50*time.Millisecond); got != 100*time.Millisecond {
		t.Fatalf("an hour later: longest = %v, want 100ms (the 300ms expired)", got)
	}
}
