package provisioningrequest

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
)

// Results are what the Manager decided in one iteration, in decision
// order: the statuses to write, the finished requests to delete and the
// consumer pods to tell. A Writer applies them after the decisions, as
// Karpenter writes status from its scheduling results.
type Results struct {
	Updates   []StatusUpdate
	Deletes   []*v1.ProvisioningRequest
	Consumers []Consumer
}

// StatusUpdate is a request with its new conditions set, and the
// condition its event tells (the outcome).
type StatusUpdate struct {
	Request *v1.ProvisioningRequest
	outcome condition
}

// Consumer is a pending pod that consumes Request (a name in the pod's
// namespace) and so triggers no scale-up of its own.
type Consumer struct {
	Pod     *apiv1.Pod
	Request string
}

// Empty reports whether there is nothing to write.
func (r Results) Empty() bool {
	return len(r.Updates) == 0 && len(r.Deletes) == 0 && len(r.Consumers) == 0
}

// Writer applies Results through the client: it deletes, writes each
// status and records the events of those written.
type Writer struct {
	client *Client
}

// NewWriter returns a Writer writing through client.
func NewWriter(client *Client) *Writer { return &Writer{client: client} }

// Write applies r; ctx bounds its calls, events records the outcome of
// each status written (on the request) and a NotTriggerScaleUp event on
// each consumer pod. A failed write is logged and dropped: the next
// iteration decides again from what the API server holds.
func (w *Writer) Write(ctx context.Context, r Results, events record.EventRecorder) {
	for _, pr := range r.Deletes {
		klog.V(4).InfoS("ProvisioningRequest: deleting, finished more than a week ago", "request", klog.KObj(pr))
		if err := w.client.Delete(ctx, pr); err != nil {
			klog.InfoS("ProvisioningRequest: deleting an old request failed", "request", klog.KObj(pr), "err", err)
		}
	}
	for _, c := range r.Consumers {
		events.Eventf(c.Pod, apiv1.EventTypeNormal, "NotTriggerScaleUp",
			"Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest %s/%s", c.Pod.Namespace, c.Request)
	}
	for _, u := range r.Updates {
		pr := u.Request
		if err := w.client.UpdateStatus(ctx, pr); err != nil {
			klog.ErrorS(err, "ProvisioningRequest: status update failed", "request", klog.KObj(pr))
			continue
		}
		last := u.outcome
		typ := apiv1.EventTypeNormal
		if last.status != metav1.ConditionTrue || last.typ == v1.Failed || last.typ == v1.BookingExpired {
			typ = apiv1.EventTypeWarning
		}
		ref := &apiv1.ObjectReference{APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind, Namespace: pr.Namespace, Name: pr.Name, UID: pr.UID, ResourceVersion: pr.ResourceVersion}
		events.Eventf(ref, typ, last.reason, "%s=%s: %s", last.typ, last.status, last.message)
	}
}
