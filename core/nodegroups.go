package core

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// deleteEmptyAutoprovisioned deletes, with --node-autoprovisioning-enabled,
// the node groups node autoprovisioning created whose target is 0: scale-down
// removed their last unneeded node (after the drain and
// --scale-down-unneeded-time), or their nodes never came and were given up.
// As upstream, a group is deleted once it is empty, not shrunk to a count;
// the provider refuses to delete a group it did not create.
func (a *Autoscaler) deleteEmptyAutoprovisioned(now time.Time) {
	if !a.opts.NodeAutoprovisioningEnabled {
		return
	}
	for _, g := range a.provider.NodeGroups() {
		if !g.Exist() || !g.Autoprovisioned() {
			continue
		}
		if target, err := g.TargetSize(); err != nil || target > 0 {
			continue
		}
		ref := scaleup.StatusConfigMapRef(a.opts)
		if err := g.Delete(); err != nil {
			klog.ErrorS(err, "Deleting an empty autoprovisioned node group failed", "group", g.Id())
			metrics.RegisterError(metrics.CloudProviderError)
			a.recorder.Eventf(ref, apiv1.EventTypeWarning, "FailedToDeleteNodeGroup", "Deleting empty node group %s failed: %v", g.Id(), err)
			continue
		}
		metrics.RegisterNodeGroupDeletion()
		klog.InfoS("Deleted an empty autoprovisioned node group", "group", g.Id())
		a.recorder.Eventf(ref, apiv1.EventTypeNormal, "DeletedNodeGroup", "Deleted empty node group %s", g.Id())
		a.acted = true
	}
}
