package informercache

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// apiServer stands for the API server: it answers every write with the
// body it was sent, and counts the writes that reached it.
type apiServer struct {
	mu     sync.Mutex
	writes []string
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.writes = append(s.writes, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (s *apiServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writes)
}

// client is a clientset for srv whose transport refuses trimmed writes, as
// main's clients do, in the content type given.
func client(t *testing.T, srv *httptest.Server, contentType string) kubernetes.Interface {
	t.Helper()
	cfg := &rest.Config{Host: srv.URL}
	cfg.ContentType = contentType
	cfg.Wrap(RefuseTrimmedWrites)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// A trimmed copy sent back to the API server fails before it leaves the
// process, in JSON and protobuf alike: a cached pod, a deep copy of one, a
// pod made from a cached workload's template (the CapacityBuffer dry run's
// earlier bug). A cached node's taint update, and a pod that did not come
// from the cache, reach the server.
func TestTrimmedCopiesCannotBeWrittenBack(t *testing.T) {
	c := New()
	cachedPod := func() *apiv1.Pod {
		p := test.BuildScheduledPod("web-1", 100, test.MiB, "web", "n1")
		p.Spec.Containers[0].Env = []apiv1.EnvVar{{Name: "MODE", Value: "batch"}}
		obj, _ := c.pod(p)
		return obj.(*apiv1.Pod)
	}
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Template: apiv1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       apiv1.PodSpec{Containers: []apiv1.Container{{Name: "app", Image: "web:1", Env: []apiv1.EnvVar{{Name: "A", Value: "1"}}}}},
		}}}
	obj, _ := template(deployment)
	cachedTemplate := obj.(*appsv1.Deployment).Spec.Template
	fromTemplate := &apiv1.Pod{ObjectMeta: *cachedTemplate.ObjectMeta.DeepCopy(), Spec: *cachedTemplate.Spec.DeepCopy()}
	fromTemplate.Namespace, fromTemplate.GenerateName = "default", "buffer-"

	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(contentType, func(t *testing.T) {
			api := &apiServer{}
			srv := httptest.NewServer(api)
			defer srv.Close()
			kube := client(t, srv, contentType)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pods := kube.CoreV1().Pods("default")

			for name, write := range map[string]func() error{
				"update of a cached pod": func() error { _, err := pods.Update(ctx, cachedPod(), metav1.UpdateOptions{}); return err },
				"create of a deep copy":  func() error { _, err := pods.Create(ctx, cachedPod().DeepCopy(), metav1.CreateOptions{}); return err },
				"dry run of a pod made from a cached template": func() error {
					_, err := pods.Create(ctx, fromTemplate, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					return err
				},
				"update of a cached deployment": func() error {
					_, err := kube.AppsV1().Deployments("default").Update(ctx, obj.(*appsv1.Deployment), metav1.UpdateOptions{})
					return err
				},
			} {
				if err := write(); !errors.Is(err, ErrTrimmedWrite) {
					t.Errorf("%s: error %v, want ErrTrimmedWrite", name, err)
				}
			}
			if n := api.count(); n != 0 {
				t.Fatalf("%d trimmed writes reached the API server: %v", n, api.writes)
			}

			nobj, _ := c.node(test.BuildNode("n1", 2000, 4*test.GiB))
			node := nobj.(*apiv1.Node).DeepCopy()
			node.Spec.Taints = append(node.Spec.Taints, apiv1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Effect: apiv1.TaintEffectNoSchedule})
			if _, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				t.Errorf("taint update of a cached node: %v", err)
			}
			live := test.BuildScheduledPod("web-2", 100, test.MiB, "web", "n1")
			if _, err := pods.Create(ctx, live, metav1.CreateOptions{}); err != nil {
				t.Errorf("create of a pod not from the cache: %v", err)
			}
			if n := api.count(); n != 2 {
				t.Errorf("%d writes reached the API server, want the node's and the live pod's: %v", n, api.writes)
			}
		})
	}
}

// Each informer keeps what its registration asked for: trimmed and marked
// pods and templates, trimmed but unmarked nodes, and Default (managedFields
// and kubectl's last-applied copy gone, marked) for a kind registered
// without a transform of its own.
func TestInformersTransformPerKind(t *testing.T) {
	withFields := metav1.ObjectMeta{Namespace: "default", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Annotations: map[string]string{lastAppliedAnnotation: "{}"}}
	meta := func(name string) metav1.ObjectMeta { m := *withFields.DeepCopy(); m.Name = name; return m }
	pod := test.BuildScheduledPod("web-1", 100, test.MiB, "web", "n1")
	pod.ObjectMeta = meta("web-1")
	pod.Spec.Containers[0].Env = []apiv1.EnvVar{{Name: "MODE", Value: "batch"}}
	node := test.BuildNode("n1", 2000, 4*test.GiB)
	node.ObjectMeta = meta("n1")
	node.Namespace = ""
	node.Status.Images = []apiv1.ContainerImage{{Names: []string{"web:1"}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: meta("web"), Spec: appsv1.ReplicaSetSpec{Template: apiv1.PodTemplateSpec{
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "app", Env: []apiv1.EnvVar{{Name: "A", Value: "1"}}}}}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: meta("web")}

	f := NewFactory(fake.NewClientset(pod, node, rs, pdb))
	c := New()
	if err := errors.Join(c.Pods(f.Core().V1().Pods()), c.Nodes(f.Core().V1().Nodes()), Templates(f.Apps().V1().ReplicaSets().Informer())); err != nil {
		t.Fatal(err)
	}
	pdbs := f.Policy().V1().PodDisruptionBudgets().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}

	gotPod, err := f.Core().V1().Pods().Lister().Pods("default").Get("web-1")
	if err != nil || !IsTrimmed(gotPod) || gotPod.Spec.Containers[0].Env != nil {
		t.Errorf("cached pod: want trimmed and marked, got env %v, managedFields %v (%v)", gotPod.Spec.Containers[0].Env, gotPod.ManagedFields, err)
	}
	gotNode, err := f.Core().V1().Nodes().Lister().Get("n1")
	if err != nil || IsTrimmed(gotNode) || gotNode.ManagedFields != nil || gotNode.Status.Images != nil || gotNode.Annotations[lastAppliedAnnotation] == "" {
		t.Errorf("cached node: want its status trimmed, managedFields gone, last-applied kept, unmarked; got %+v (%v)", gotNode.ObjectMeta, err)
	}
	gotRS, err := f.Apps().V1().ReplicaSets().Lister().ReplicaSets("default").Get("web")
	if err != nil || !IsTrimmed(gotRS) || !IsTrimmed(&gotRS.Spec.Template) || gotRS.Spec.Template.Spec.Containers[0].Env != nil {
		t.Errorf("cached ReplicaSet: want it and its template trimmed and marked, got %+v (%v)", gotRS, err)
	}
	gotPDB, err := pdbs.PodDisruptionBudgets("default").Get("web")
	if err != nil || !IsTrimmed(gotPDB) || gotPDB.Annotations[lastAppliedAnnotation] != "" {
		t.Errorf("cached PodDisruptionBudget: want Default's trim, got %+v (%v)", gotPDB.ObjectMeta, err)
	}
}
