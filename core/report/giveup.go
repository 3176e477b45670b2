package report

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/giveup"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

var _ giveup.Recorder = (*Reporter)(nil)

// GiveUps records the give-ups of a loop, as upstream does: the nodes that
// will not come in failed_node_creations_total and failed_scale_ups_total,
// and on the status ConfigMap ScaleUpTimedOut for a scale-up whose nodes
// did not register in time, DeleteUnregistered / DeleteUnregisteredFailed
// for each never-registered instance whose deletion was asked for. Groups
// the registry backed off get their health series at once.
func (r *Reporter) GiveUps(gaveUp []giveup.Outcome, now time.Time) {
	backedOff := false
	for _, g := range gaveUp {
		p := g.Plan
		if p.Retry {
			klog.InfoS("Asked again to delete given-up instances", "nodeGroup", p.GroupID, "instances", len(p.Instances))
		} else {
			klog.InfoS("Gave up on nodes", "nodeGroup", p.GroupID, "nodes", g.Decreased, "reason", p.Reason, "backedOff", p.BackOff)
			metrics.RegisterFailedNodeCreations(failedScaleUpReason(p.Reason), p.Decrease)
			r.countFailedScaleUp(p)
			backedOff = backedOff || p.BackOff
		}
		if p.TimedOutAfter > 0 {
			r.events.Eventf(r.status, apiv1.EventTypeWarning, "ScaleUpTimedOut",
				"Nodes added to group %s failed to register within %v", p.GroupID, p.TimedOutAfter)
		}
		removed := 0
		for _, in := range p.Instances {
			if in.Status != nil && in.Status.ErrorInfo != nil {
				continue // failed to create, not unregistered: upstream records no event
			}
			if g.DeleteErr != nil {
				r.events.Eventf(r.status, apiv1.EventTypeWarning, "DeleteUnregisteredFailed", "Failed to remove node %s: %v", in.Id, g.DeleteErr)
				continue
			}
			r.events.Eventf(r.status, apiv1.EventTypeNormal, "DeleteUnregistered", "Removed unregistered node %v", in.Id)
			removed++
		}
		metrics.RegisterOldUnregisteredNodesRemoved(removed)
	}
	if backedOff {
		r.groupHealth(now)
	}
}

// countFailedScaleUp counts a give-up in failed_scale_ups_total, labelled
// with the group template's GPU and DRA drivers, as upstream does.
func (r *Reporter) countFailedScaleUp(p clusterstate.GiveUpPlan) {
	tmpl, err := p.Group.TemplateNodeInfo()
	if err != nil {
		klog.V(4).InfoS("No template for the failed scale-up's metric labels", "nodeGroup", p.GroupID, "err", err)
		tmpl = nil
	}
	gpuName, gpuType, draDrivers := metricLabels(r.provider, tmpl)
	metrics.RegisterFailedScaleUp(failedScaleUpReason(p.Reason), gpuName, gpuType, draDrivers)
}

// failedScaleUpReason is the metrics' reason for a give-up.
func failedScaleUpReason(r clusterstate.GiveUpReason) string {
	if r == clusterstate.GiveUpCloudError {
		return metrics.FailedScaleUpCloudProviderError
	}
	return metrics.FailedScaleUpTimeout
}
