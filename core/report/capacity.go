package report

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/capacitybuffer"
	"github.com/doks-autoscaler/cluster-autoscaler/provisioningrequest"
)

var _ provisioningrequest.Recorder = (*Reporter)(nil)

// The capacity APIs' case: what the scale-up phase decided about
// ProvisioningRequests and CapacityBuffers is written once its decisions
// are made, as Karpenter writes status from its scheduling results. The
// writers own the API calls (their clients) and record what they wrote
// through the reporter.

// ProvisioningRequests writes res through w: old requests deleted,
// statuses written with an event on each request telling its outcome, and
// a NotTriggerScaleUp event on each consumer pod.
func (r *Reporter) ProvisioningRequests(ctx context.Context, res provisioningrequest.Results, w *provisioningrequest.Writer) {
	if res.Empty() {
		return
	}
	w.Write(ctx, res, r)
}

// ProvisioningRequestConsumer records a pending pod that consumes a
// request: a NotTriggerScaleUp event on it (provisioningrequest.Recorder).
func (r *Reporter) ProvisioningRequestConsumer(c provisioningrequest.Consumer) {
	r.events.Eventf(c.Pod, apiv1.EventTypeNormal, "NotTriggerScaleUp",
		"Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest %s/%s", c.Pod.Namespace, c.Request)
}

// ProvisioningRequestWritten records a request's status written: an event
// on the request telling its outcome, a Warning unless it is a condition
// that went well (provisioningrequest.Recorder).
func (r *Reporter) ProvisioningRequestWritten(u provisioningrequest.StatusUpdate) {
	pr, last := u.Request, u.Outcome
	typ := apiv1.EventTypeNormal
	if last.Status != metav1.ConditionTrue || last.Type == v1.Failed || last.Type == v1.BookingExpired {
		typ = apiv1.EventTypeWarning
	}
	ref := &apiv1.ObjectReference{APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind, Namespace: pr.Namespace, Name: pr.Name, UID: pr.UID, ResourceVersion: pr.ResourceVersion}
	r.events.Eventf(ref, typ, last.Reason, "%s=%s: %s", last.Type, last.Status, last.Message)
}

// CapacityBuffers writes the buffers' changed Provisioning conditions
// through w.
func (r *Reporter) CapacityBuffers(ctx context.Context, updates []capacitybuffer.ProvisioningUpdate, w *capacitybuffer.StatusWriter) {
	if len(updates) == 0 {
		return
	}
	w.Write(ctx, updates)
}
