package report

import (
	"context"

	"github.com/doks-autoscaler/cluster-autoscaler/capacitybuffer"
	"github.com/doks-autoscaler/cluster-autoscaler/provisioningrequest"
)

// The capacity APIs' case: what the scale-up phase decided about
// ProvisioningRequests and CapacityBuffers is written once its decisions
// are made, as Karpenter writes status from its scheduling results. The
// writers own the API calls (their clients); the events go through the
// reporter's recorder.

// ProvisioningRequests writes res through w: old requests deleted,
// statuses written with an event on each request telling its outcome, and
// a NotTriggerScaleUp event on each consumer pod.
func (r *Reporter) ProvisioningRequests(ctx context.Context, res provisioningrequest.Results, w *provisioningrequest.Writer) {
	if res.Empty() {
		return
	}
	w.Write(ctx, res, r.events)
}

// CapacityBuffers writes the buffers' changed Provisioning conditions
// through w.
func (r *Reporter) CapacityBuffers(ctx context.Context, updates []capacitybuffer.ProvisioningUpdate, w *capacitybuffer.StatusWriter) {
	if len(updates) == 0 {
		return
	}
	w.Write(ctx, updates)
}
