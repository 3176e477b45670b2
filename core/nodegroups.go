package core

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// deleteEmptyAutoprovisioned deletes, with --node-autoprovisioning-enabled,
// the node groups node autoprovisioning created whose target is 0 (their
// nodes never came and were given up), and records those the provider
// deleted with their last nodes that no removal has reported yet. As
// upstream, a group is deleted once it is empty, not kept at a count of 0;
// the provider refuses to delete a group it did not create.
func (a *Autoscaler) deleteEmptyAutoprovisioned() {
	if !a.opts.NodeAutoprovisioningEnabled {
		return
	}
	for _, g := range a.provider.NodeGroups() {
		if !g.Autoprovisioned() {
			continue
		}
		if target, err := g.TargetSize(); g.Exist() && (err != nil || target > 0) {
			continue
		}
		if a.deleteNodeGroup(g) {
			a.acted = true
		}
	}
}

// deleteNodeGroup calls Delete on an autoprovisioned group that has become
// empty and records the deletion: the deleted_node_groups_total metric and
// a DeletedNodeGroup event, once per group however many removals report
// it. When scale-down's last removal in a pool made the provider delete
// the pool in place of its nodes, Delete has nothing left to do. It is
// called from the loop and from removals' goroutines, and reports whether
// this call deleted the group.
func (a *Autoscaler) deleteNodeGroup(g cloudprovider.NodeGroup) bool {
	a.deletedGroupsMu.Lock()
	defer a.deletedGroupsMu.Unlock()
	if a.deletedGroups[g.Id()] {
		return false
	}
	ref := scaleup.StatusConfigMapRef(a.opts)
	if err := g.Delete(); err != nil {
		klog.ErrorS(err, "Deleting an empty autoprovisioned node group failed", "group", g.Id())
		metrics.RegisterError(metrics.CloudProviderError)
		a.recorder.Eventf(ref, apiv1.EventTypeWarning, "FailedToDeleteNodeGroup", "Deleting empty node group %s failed: %v", g.Id(), err)
		return false
	}
	a.deletedGroups[g.Id()] = true
	metrics.RegisterNodeGroupDeletion()
	klog.InfoS("Deleted an empty autoprovisioned node group", "group", g.Id())
	a.recorder.Eventf(ref, apiv1.EventTypeNormal, "DeletedNodeGroup", "Deleted empty node group %s", g.Id())
	return true
}
