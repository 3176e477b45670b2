package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
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

func (s *scenario) buffers() dynamic.ResourceInterface {
	return s.resource(v1beta1.CapacityBuffersResource)
}

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

// restrictedTemplate is a PodTemplate that the restricted Pod Security
// Standard admits only with its security contexts, which the autoscaler's
// caches drop from every pod template they hold; without them (compliant
// false) it is refused.
func restrictedTemplate(ns, name string, compliant bool) *apiv1.PodTemplate {
	c := apiv1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10",
		Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}
	t := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: apiv1.PodSpec{Containers: []apiv1.Container{c}}}}
	if compliant {
		t.Template.Spec.SecurityContext = &apiv1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &apiv1.SeccompProfile{Type: apiv1.SeccompProfileTypeRuntimeDefault}}
		t.Template.Spec.Containers[0].SecurityContext = &apiv1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &apiv1.Capabilities{Drop: []apiv1.Capability{"ALL"}}}
	}
	return t
}

// A buffer's dry run meets the namespace's admission as a real pod would,
// and a refusal costs a handful of API calls, not a hot loop:
// (e) in a namespace enforcing the restricted Pod Security Standard, a
// buffer whose template complies is provisioned (the dry run sends the
// template's security contexts, which the caches trim) and one whose
// template does not is refused; a buffer refused by a ResourceQuota is
// retried with backoff: its dry runs over a minute, counted from the
// autoscaler's own client metrics (POSTs refused with 403: nothing else the
// autoscaler creates is refused here), are a handful.
func TestCapacityBufferAdmission(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("warm", 0, 0, 3)}})
	ns, err := s.kube.CoreV1().Namespaces().Get(s.ctx, s.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := s.kube.CoreV1().Namespaces().Update(s.ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, pt := range []*apiv1.PodTemplate{restrictedTemplate(s.ns, "compliant", true), restrictedTemplate(s.ns, "root", false)} {
		if _, err := s.kube.CoreV1().PodTemplates(s.ns).Create(s.ctx, pt, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ca := s.startAutoscaler("--capacity-buffer-controller-enabled", "--capacity-buffer-pod-injection-enabled")

	s.applyBuffer("compliant", v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "compliant"}, Replicas: ptr.To[int32](1)})
	s.applyBuffer("root", v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "root"}, Replicas: ptr.To[int32](1)})
	s.eventually("compliant buffer ready", 30*time.Second, s.bufferReplicas("compliant", 1))
	s.waitTarget("warm", 1, 60*time.Second)
	s.eventually("root buffer refused", 30*time.Second, func() error {
		c := meta.FindStatusCondition(s.buffer("root").Status.Conditions, v1beta1.ReadyForProvisioningCondition)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "violates PodSecurity") {
			return fmt.Errorf("root buffer condition %+v, want a PodSecurity refusal", c)
		}
		return nil
	})
	if err := s.buffers().Delete(s.ctx, "root", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// No pod at all may be created in the namespace: every dry run is
	// refused, whatever the quota's usage (status set here, in case no
	// quota controller runs).
	q := &apiv1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "no-pods"},
		Spec: apiv1.ResourceQuotaSpec{Hard: apiv1.ResourceList{apiv1.ResourcePods: resource.MustParse("0")}}}
	q, err = s.kube.CoreV1().ResourceQuotas(s.ns).Create(s.ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status = apiv1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: apiv1.ResourceList{apiv1.ResourcePods: resource.MustParse("0")}}
	if _, err := s.kube.CoreV1().ResourceQuotas(s.ns).UpdateStatus(s.ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused := func() float64 {
		return s.metric(ca, "rest_client_requests_total", map[string]string{"method": "POST", "code": "403"})
	}
	before := refused()
	s.applyBuffer("quota", v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "compliant"}, Replicas: ptr.To[int32](1)})
	s.eventually("quota buffer refused", 30*time.Second, func() error {
		c := meta.FindStatusCondition(s.buffer("quota").Status.Conditions, v1beta1.ReadyForProvisioningCondition)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "exceeded quota: no-pods") {
			return fmt.Errorf("quota buffer condition %+v, want an exceeded quota refusal", c)
		}
		return nil
	})
	rv := s.buffer("quota").ResourceVersion
	time.Sleep(time.Minute)
	// Retried at 1, 2, 4, 8, 16 and 32 s after each refusal: 6 or 7 tries.
	tries := refused() - before
	t.Logf("dry runs refused for quota in a minute: %v", tries)
	if tries < 2 || tries > 10 {
		t.Errorf("%v dry runs refused in a minute for one unchanged buffer, want a handful (retried with backoff)", tries)
	}
	if got := s.buffer("quota").ResourceVersion; got != rv {
		t.Errorf("the refused buffer was written again (resourceVersion %s, then %s) for the same refusal", rv, got)
	}
	// The compliant buffer stays provisioned (its admitted template is not
	// sent again while it is unchanged).
	if err := s.bufferReplicas("compliant", 1)(); err != nil {
		t.Error(err)
	}
}
