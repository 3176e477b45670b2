package shadowkube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/statuscm"
)

type seen struct {
	mu   sync.Mutex
	reqs []string // "METHOD path?query"
}

func (s *seen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// apiServer answers every request 200 with an empty JSON object and
// remembers it.
func apiServer(t *testing.T) (*seen, *rest.Config) {
	t.Helper()
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		fmt.Fprint(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return s, &rest.Config{Host: srv.URL}
}

func TestWritesToNodesAndPodsAreDryRunsLeasesAndEventsAreNot(t *testing.T) {
	s, cfg := apiServer(t)
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ops []string
	cfg.Wrap(DryRun(Options{Hold: time.Minute, Now: func() time.Time { return clk }, OnWrite: func(op string) { ops = append(ops, op) }}))
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if _, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Nodes().Patch(ctx, "n1", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1"}}
	if err := kube.PolicyV1().Evictions("ns").Evict(ctx, ev); err != nil {
		t.Fatal(err)
	}
	// Already a dry run: stays one, with one dryRun value.
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p2"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler"}}
	if _, err := kube.CoordinationV1().Leases("kube-system").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Events("ns").Create(ctx, &apiv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"PUT /api/v1/nodes/n1?dryRun=All",
		"PATCH /api/v1/nodes/n1?dryRun=All",
		"DELETE /api/v1/nodes/n1?dryRun=All",
		"POST /api/v1/namespaces/ns/pods/p1/eviction?dryRun=All",
		"POST /api/v1/namespaces/ns/pods?dryRun=All",
		"PUT /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cluster-autoscaler?",
		"POST /api/v1/namespaces/ns/events?",
	}
	got := s.all()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Join(ops, ",") != "update_nodes,patch_nodes,delete_nodes,create_pods_eviction,create_pods" {
		t.Fatalf("operations %v", ops)
	}

	// The evicted pod is gone for the hold, answered without asking the
	// server; another pod is asked for.
	if _, err := kube.CoreV1().Pods("ns").Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("GET of the evicted pod: %v, want NotFound", err)
	}
	if _, err := kube.CoreV1().Pods("ns").Get(ctx, "p3", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.all()); n != len(want)+1 {
		t.Fatalf("%d requests, want the GET of p3 only added", n)
	}
	clk = clk.Add(time.Minute)
	if _, err := kube.CoreV1().Pods("ns").Get(ctx, "p1", metav1.GetOptions{}); err != nil {
		t.Fatalf("GET of the evicted pod after the hold: %v", err)
	}
}

func TestParsePath(t *testing.T) {
	for path, want := range map[string]Target{
		"/api/v1/nodes/n1":                                                         {Resource: "nodes", Name: "n1"},
		"/api/v1/namespaces/ns/pods/p/eviction":                                    {Resource: "pods", Namespace: "ns", Name: "p", Subresource: "eviction"},
		"/api/v1/namespaces/ns":                                                    {Resource: "namespaces", Name: "ns"},
		"/apis/coordination.k8s.io/v1/namespaces/a/leases":                         {Group: "coordination.k8s.io", Resource: "leases", Namespace: "a"},
		"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/a/capacitybuffers/b/status": {Group: "autoscaling.x-k8s.io", Resource: "capacitybuffers", Namespace: "a", Name: "b", Subresource: "status"},
	} {
		got, ok := ParsePath(path)
		if !ok || got != want {
			t.Errorf("%s: %+v (%v), want %+v", path, got, ok, want)
		}
	}
	if _, ok := ParsePath("/version"); ok {
		t.Error("/version parsed")
	}
}

func TestStatusConfigMapIsMarked(t *testing.T) {
	kube := fake.NewClientset()
	marked := MarkStatus(kube, "kube-system", "cluster-autoscaler-status")
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &api.ClusterAutoscalerStatus{AutoscalerStatus: api.ClusterAutoscalerRunning, Message: "token lacks a scope"}
	last, err := statuscm.WriteStatusConfigMap(ctx, marked, "kube-system", "cluster-autoscaler-status", nil, st, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	// An update (the loop's writes after the first) is marked too.
	st.Message = ""
	if _, err := statuscm.WriteStatusConfigMap(ctx, marked, "kube-system", "cluster-autoscaler-status", last, st, nil, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Annotations[Annotation] != "true" {
		t.Errorf("annotations %v", cm.Annotations)
	}
	var got api.ClusterAutoscalerStatus
	if err := yaml.Unmarshal([]byte(cm.Data[statuscm.StatusDataKey]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Message != StatusNote || got.AutoscalerStatus != api.ClusterAutoscalerRunning {
		t.Errorf("status %+v", got)
	}
	var again api.ClusterAutoscalerStatus
	if err := yaml.Unmarshal([]byte(MarkStatusBody("message: x\nautoscalerStatus: Running\n")), &again); err != nil || again.Message != StatusNote+"; x" {
		t.Errorf("marked status %+v (%v)", again, err)
	}
	// Other ConfigMaps are left alone.
	if _, err := marked.CoreV1().ConfigMaps("kube-system").Create(ctx, &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, _ := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "other", metav1.GetOptions{})
	if other.Annotations[Annotation] != "" {
		t.Error("another ConfigMap was marked")
	}
}
