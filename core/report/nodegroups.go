package report

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/core/groupdeletion"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

var _ groupdeletion.Recorder = (*Reporter)(nil)

// NodeGroupDeleted records a node group deletion: deleted_node_groups_total
// and a DeletedNodeGroup event, or a FailedToDeleteNodeGroup warning naming
// the next attempt (groupdeletion.Recorder). It is safe to call from
// removals' goroutines.
func (r *Reporter) NodeGroupDeleted(d groupdeletion.Outcome) {
	if d.Err != nil {
		klog.ErrorS(d.Err, "Deleting an empty autoprovisioned node group failed", "group", d.GroupID, "nextAttempt", d.NextAttempt)
		metrics.RegisterError(metrics.CloudProviderError)
		r.events.Eventf(r.status, apiv1.EventTypeWarning, "FailedToDeleteNodeGroup", "Deleting empty node group %s failed (next attempt after %s): %v",
			d.GroupID, d.NextAttempt.UTC().Format(time.RFC3339), d.Err)
		return
	}
	metrics.RegisterNodeGroupDeletion()
	klog.InfoS("Deleted an empty autoprovisioned node group", "group", d.GroupID)
	r.events.Eventf(r.status, apiv1.EventTypeNormal, "DeletedNodeGroup", "Deleted empty node group %s", d.GroupID)
}
