package provisioningrequest

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// condition its event tells (the last one set).
type StatusUpdate struct {
	Request *v1.ProvisioningRequest
	Outcome metav1.Condition
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

// Recorder records what a Writer wrote. The reporter (core/report)
// implements it: it alone writes events.
type Recorder interface {
	// ProvisioningRequestConsumer: c's pod triggers no scale-up of its
	// own, it consumes c.Request.
	ProvisioningRequestConsumer(c Consumer)
	// ProvisioningRequestWritten: u's status was written.
	ProvisioningRequestWritten(u StatusUpdate)
}

// Writer applies Results through the client: it deletes, writes each
// status and records what it wrote through a Recorder.
type Writer struct {
	client *Client
}

// NewWriter returns a Writer writing through client.
func NewWriter(client *Client) *Writer { return &Writer{client: client} }

// Write applies r; ctx bounds its calls, rec records each consumer pod
// and each status written. A failed write is logged and dropped: the next
// iteration decides again from what the API server holds.
func (w *Writer) Write(ctx context.Context, r Results, rec Recorder) {
	for _, pr := range r.Deletes {
		klog.V(4).InfoS("ProvisioningRequest: deleting, finished more than a week ago", "request", klog.KObj(pr))
		if err := w.client.Delete(ctx, pr); err != nil {
			klog.InfoS("ProvisioningRequest: deleting an old request failed", "request", klog.KObj(pr), "err", err)
		}
	}
	for _, c := range r.Consumers {
		rec.ProvisioningRequestConsumer(c)
	}
	for _, u := range r.Updates {
		if err := w.client.UpdateStatus(ctx, u.Request); err != nil {
			klog.ErrorS(err, "ProvisioningRequest: status update failed", "request", klog.KObj(u.Request))
			continue
		}
		rec.ProvisioningRequestWritten(u)
	}
}
