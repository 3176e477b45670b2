package capacitybuffer

import (
	"context"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// Upstream's marker of a buffer's fake pods (processors/capacitybuffer).
const (
	FakePodAnnotationKey   = "podType"
	FakePodAnnotationValue = "capacityBufferFakePod"
)

// Injector adds each provisionable buffer's replicas as fake pending pods
// to scale-up (--capacity-buffer-pod-injection-enabled), and decides the
// buffer's Provisioning condition (whether it does). It writes nothing:
// the conditions that change collect in its Results, which the loop has a
// StatusWriter write once the iteration's decisions are made.
type Injector struct {
	client    *Client
	sources   Sources
	templates *Templates
	// synced: the caches it reads have their first list (nil: the buffer
	// cache alone).
	synced []func() bool
	// results: the Provisioning conditions this iteration changed.
	results []ProvisioningUpdate
}

// NewInjector returns the processor. templates is the in-process
// controller's store (nil without it).
func NewInjector(client *Client, sources Sources, templates *Templates) *Injector {
	return &Injector{client: client, sources: sources, templates: templates}
}

// ProvisioningUpdate is a buffer whose Provisioning condition changed: the
// buffer with the new condition set, and the condition's status and
// reason.
type ProvisioningUpdate struct {
	Buffer *v1beta1.CapacityBuffer
	Status metav1.ConditionStatus
	Reason string
}

// Results returns the Provisioning conditions changed since the
// iteration's Process began, and forgets them.
func (in *Injector) Results() []ProvisioningUpdate {
	r := in.results
	in.results = nil
	return r
}

// Process implements fakepods.PodListProcessor: the fake pods go after the
// real pending pods, which are placed first. It starts an iteration: the
// results of the previous one, if nobody took them, are dropped.
func (in *Injector) Process(_ *fakepods.Context, pending []*apiv1.Pod) ([]*apiv1.Pod, error) {
	in.results = nil
	for _, synced := range append([]func() bool{in.client.HasSynced}, in.synced...) {
		if !synced() {
			klog.V(1).InfoS("CapacityBuffers not injected: the caches have not synced yet")
			return pending, nil
		}
	}
	total, buffers := 0, 0
	for _, b := range in.client.List() {
		if !provisionable(b) {
			continue
		}
		fake := in.provision(b)
		if len(fake) > 0 {
			total += len(fake)
			buffers++
			pending = append(pending, fake...)
		}
	}
	if total > 0 {
		klog.V(1).InfoS("Scale-up: CapacityBuffer fake pods added", "pods", total, "buffers", buffers)
	}
	return pending, nil
}

// CleanUp implements fakepods.PodListProcessor.
func (in *Injector) CleanUp() {}

// provisionable reports whether the injector provisions b: a buffer of the
// active strategy that the controller resolved (upstream's filters: the
// status names the strategy, and the buffer is ReadyForProvisioning or
// already Provisioning).
func provisionable(b *v1beta1.CapacityBuffer) bool {
	if b.Status.ProvisioningStrategy == nil || *b.Status.ProvisioningStrategy != v1beta1.ActiveProvisioningStrategy {
		return false
	}
	return meta.IsStatusConditionTrue(b.Status.Conditions, v1beta1.ReadyForProvisioningCondition) ||
		meta.IsStatusConditionTrue(b.Status.Conditions, v1beta1.ProvisioningCondition)
}

// provision returns the buffer's fake pods and sets its Provisioning
// condition (written only when it changes).
func (in *Injector) provision(b *v1beta1.CapacityBuffer) []*apiv1.Pod {
	switch {
	case b.Status.Replicas == nil || meta.IsStatusConditionFalse(b.Status.Conditions, v1beta1.ReadyForProvisioningCondition):
		in.setProvisioning(b, metav1.ConditionFalse, v1beta1.NotReadyForProvisioningReason, "CapacityBuffer is not ready for provisioning")
		return nil
	case *b.Status.Replicas == 0:
		in.setProvisioning(b, metav1.ConditionFalse, v1beta1.BufferIsEmptyReason, "CapacityBuffer has zero replicas")
		return nil
	}
	tmpl, err := in.template(b)
	if err != nil {
		in.setProvisioning(b, metav1.ConditionFalse, v1beta1.FailedToGetPodTemplateReason, fmt.Sprintf("failed to get pod template: %v", err))
		return nil
	}
	if tmpl == nil {
		return nil // the template changed since the status: wait for the controller
	}
	in.setProvisioning(b, metav1.ConditionTrue, v1beta1.FakePodsInjectedReason, "")
	return FakePods(b, tmpl, int(*b.Status.Replicas))
}

// template is the buffer's pod template: the in-process controller's
// (after its dry run), else the PodTemplate the status names (written by
// this or another controller), else the scalable object's. nil, nil: the
// PodTemplate's generation is newer than the status (upstream skips such
// buffers until the controller catches up).
func (in *Injector) template(b *v1beta1.CapacityBuffer) (*apiv1.PodTemplateSpec, error) {
	if t := in.templates.Get(b.UID); t != nil {
		return t, nil
	}
	if ref := b.Status.PodTemplateRef; ref != nil {
		pt, err := in.sources.PodTemplates.PodTemplates(b.Namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		if g := b.Status.PodTemplateGeneration; g != nil && *g != pt.Generation {
			return nil, nil
		}
		t := pt.Template.DeepCopy()
		fakepods.RequestsFromLimits(&t.Spec)
		return t, nil
	}
	r, err := in.sources.Resolve(b)
	if err != nil {
		return nil, err
	}
	return r.Template, nil
}

// setProvisioning adds b with its Provisioning condition set to the
// results when that changes it.
func (in *Injector) setProvisioning(b *v1beta1.CapacityBuffer, status metav1.ConditionStatus, reason, msg string) {
	next := b.DeepCopy()
	if !setCondition(next, v1beta1.ProvisioningCondition, status, reason, msg) {
		return
	}
	in.results = append(in.results, ProvisioningUpdate{Buffer: next, Status: status, Reason: reason})
}

// StatusWriter writes the Provisioning conditions the Injector decided.
type StatusWriter struct {
	client *Client
}

// Write writes each buffer's status; ctx bounds the calls. A failed write
// is logged and dropped: the next iteration decides again from the cache.
func (w *StatusWriter) Write(ctx context.Context, updates []ProvisioningUpdate) {
	for _, u := range updates {
		if err := w.client.UpdateStatus(ctx, u.Buffer); err != nil {
			klog.ErrorS(err, "CapacityBuffer Provisioning condition not written", "buffer", klog.KObj(u.Buffer), "reason", u.Reason)
			continue
		}
		klog.InfoS("CapacityBuffer provisioning", "buffer", klog.KObj(u.Buffer), "status", u.Status, "reason", u.Reason)
	}
}

// FakePods makes n pods of tmpl for buffer b: named
// capacity-buffer-<buffer>-<i> (upstream's names), owned by the buffer,
// marked fake (pods.MarkFake and upstream's buffer marker) and safe to evict,
// so they never block a scale-down, only need room elsewhere to allow it.
func FakePods(b *v1beta1.CapacityBuffer, tmpl *apiv1.PodTemplateSpec, n int) []*apiv1.Pod {
	sample := &apiv1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	sample.Namespace = b.Namespace
	sample.Spec.NodeName = ""
	sample.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1beta1.APIVersion, Kind: v1beta1.Kind, Name: b.Name, UID: b.UID, Controller: ptrTrue()}}
	fakepods.MarkFake(sample)
	sample.Annotations[FakePodAnnotationKey] = FakePodAnnotationValue
	sample.Annotations[drain.SafeToEvictKey] = "true"
	sample.CreationTimestamp = b.CreationTimestamp
	sample.Status = apiv1.PodStatus{Phase: apiv1.PodPending}
	out := make([]*apiv1.Pod, n)
	for i := range out {
		p := sample.DeepCopy()
		p.Name = fmt.Sprintf("capacity-buffer-%s-%d", b.Name, i+1)
		p.UID = types.UID(fmt.Sprintf("%s-%d", b.UID, i+1))
		out[i] = p
	}
	return out
}

func ptrTrue() *bool { t := true; return &t }
