package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// resource is the scenario's namespaced client of a custom resource (the
// CRDs of deploy/crds are installed by the sandbox).
func (s *scenario) resource(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	s.t.Helper()
	dyn, err := dynamic.NewForConfig(sharedCP.Config)
	if err != nil {
		s.t.Fatal(err)
	}
	return dyn.Resource(gvr).Namespace(s.ns)
}

// getInto reads the named object of ri into out (a typed API object).
func (s *scenario) getInto(ri dynamic.ResourceInterface, name string, out any) {
	s.t.Helper()
	u, err := ri.Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) buffers() dynamic.ResourceInterface { return s.resource(v1beta1.Resource) }

func (s *scenario) buffer(name string) *v1beta1.CapacityBuffer {
	s.t.Helper()
	b := &v1beta1.CapacityBuffer{}
	s.getInto(s.buffers(), name, b)
	return b
}

func (s *scenario) applyBuffer(name string, spec v1beta1.CapacityBufferSpec) {
	s.t.Helper()
	b := &v1beta1.CapacityBuffer{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.APIVersion, Kind: v1beta1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Spec: spec}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		s.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if cur, err := s.buffers().Get(s.ctx, name, metav1.GetOptions{}); err == nil {
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = s.buffers().Update(s.ctx, u, metav1.UpdateOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		return
	}
	if _, err := s.buffers().Create(s.ctx, u, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// bufferReplicas checks that the buffer is ready with n replicas and provisioned.
func (s *scenario) bufferReplicas(name string, n int32) func() error {
	return func() error {
		b := s.buffer(name)
		if !meta.IsStatusConditionTrue(b.Status.Conditions, v1beta1.ReadyForProvisioningCondition) || b.Status.Replicas == nil || *b.Status.Replicas != n {
			return fmt.Errorf("buffer %s: status %+v, want ready with %d replicas", name, b.Status, n)
		}
		return nil
	}
}

// noBufferPods checks that no Pod object and no event names a buffer's fake pod.
func (s *scenario) noBufferPods() {
	s.t.Helper()
	l, err := s.kube.CoreV1().Pods("").List(s.ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, p := range l.Items {
		if strings.HasPrefix(p.Name, "capacity-buffer-") {
			s.t.Errorf("a Pod object exists for a buffer: %s/%s", p.Namespace, p.Name)
		}
	}
	ev, err := s.kube.CoreV1().Events(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range ev.Items {
		if e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.InvolvedObject.Name, "capacity-buffer-") {
			s.t.Errorf("event %s on fake pod %s", e.Reason, e.InvolvedObject.Name)
		}
	}
}

// A buffer keeps warm room for a Deployment: (a) the pool grows for the
// buffer's two 1-CPU pods on a full cluster, with no Pod object for them;
// (b) the Deployment scaled by 2 runs in that room with no scale-up wait,
// and the pool grows again to restore the buffer; (d) a buffer by
// percentage follows the Deployment's replicas; (c) deleting the buffer
// frees its nodes after --scale-down-unneeded-time.
func TestCapacityBufferKeepsWarmRoom(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("warm", 1, 1, 8)}})
	s.startAutoscaler("--capacity-buffer-controller-enabled", "--capacity-buffer-pod-injection-enabled")
	onPool := withNodeSelector(nodeagent.LabelNodePool, "warm")
	// The one node is full for 1-CPU pods; web starts with none.
	s.deploy("fill", 1, bigPod, onPool)
	s.waitRunning("fill", 1, 60*time.Second)
	s.deploy("web", 0, "1", onPool)

	// (a) Two 1-CPU pods' room: one s-2vcpu-4gb node (1900m) each.
	s.applyBuffer("warm", v1beta1.CapacityBufferSpec{
		ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Replicas: ptr.To[int32](2)})
	s.eventually("buffer resolved", 30*time.Second, s.bufferReplicas("warm", 2))
	s.waitTarget("warm", 3, 60*time.Second)
	s.waitNodes("warm", 3, 60*time.Second)
	s.holds("target 3", 3*time.Second, s.targetIs("warm", 3))
	if c := meta.FindStatusCondition(s.buffer("warm").Status.Conditions, v1beta1.ProvisioningCondition); c == nil || c.Reason != v1beta1.FakePodsInjectedReason {
		t.Errorf("Provisioning condition %+v, want True FakePodsInjected", c)
	}
	s.noBufferPods()

	// (b) The pods take the warm room: they run while the pool is still at
	// 3 (no node was added for them), then the buffer is restored.
	s.scaleDeployment("web", 2)
	s.waitRunning("web", 2, 60*time.Second)
	if got := s.pool("warm").Count; got != 3 && len(s.poolNodes("warm")) != 3 {
		t.Errorf("web's pods waited for a scale-up (pool at %d)", got)
	}
	s.waitTarget("warm", 5, 60*time.Second)
	s.waitNodes("warm", 5, 60*time.Second)
	if m := s.maxTarget("warm"); m != 5 {
		t.Errorf("pool reached %d nodes, want 5 (fill, web's two, the buffer's two)", m)
	}

	// (d) By percentage: 50% of web's 2 replicas is 1, then 2 of 4.
	s.applyBuffer("warm", v1beta1.CapacityBufferSpec{
		ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Percentage: ptr.To[int32](50)})
	s.eventually("buffer at 50% of 2", 30*time.Second, s.bufferReplicas("warm", 1))
	s.scaleDeployment("web", 4)
	s.eventually("buffer at 50% of 4", 30*time.Second, s.bufferReplicas("warm", 2))
	s.waitRunning("web", 4, 90*time.Second)
	// fill, web's four, the buffer's two.
	s.waitTarget("warm", 7, 90*time.Second)
	s.waitNodes("warm", 7, 60*time.Second)

	// (c) Without the buffer its node goes after the unneeded time.
	if err := s.buffers().Delete(s.ctx, "warm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitTarget("warm", 5, 90*time.Second)
	s.holds("target 5", 3*time.Second, s.targetIs("warm", 5))
	s.noBufferPods()
}
