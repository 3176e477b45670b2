package clusterstate

import (
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
)

// Taints the autoscaler puts on nodes it removes.
const (
	// ToBeDeletedTaint marks a node being drained and deleted (NoSchedule;
	// the value is the unix time the taint was added).
	ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
	// DeletionCandidateTaint is the soft (PreferNoSchedule) taint on
	// unneeded nodes (--max-bulk-soft-taint-count); with soft taints off it
	// is removed at start-up.
	DeletionCandidateTaint = "DeletionCandidateOfClusterAutoscaler"
)

// MaxNodeStartupTime is how long after creation an unready node counts as
// "not started" rather than unready (upstream's --max-node-startup-time
// default; this project does not expose the flag).
const MaxNodeStartupTime = 15 * time.Minute

// HasToBeDeletedTaint reports whether the node carries ToBeDeletedTaint.
func HasToBeDeletedTaint(node *apiv1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t apiv1.Taint) bool { return t.Key == ToBeDeletedTaint })
}

// notReadyTaints are the node-lifecycle taints that say a node cannot run
// pods yet, whatever its Ready condition says: the node controller (or the
// TaintNodesByCondition admission) puts them on a node that has just
// registered and takes them off once it is ready.
var notReadyTaints = map[string]bool{
	apiv1.TaintNodeNotReady:           true,
	apiv1.TaintNodeUnreachable:        true,
	apiv1.TaintNodeDiskPressure:       true,
	apiv1.TaintNodeNetworkUnavailable: true,
}

// ReadinessConditions are the node conditions NodeReadiness reads: the
// informer cache keeps these and drops a node's others.
var ReadinessConditions = map[apiv1.NodeConditionType]bool{
	apiv1.NodeReady: true, apiv1.NodeDiskPressure: true, apiv1.NodeNetworkUnavailable: true,
}

// NodeReadiness tells whether the node is ready as upstream judges it, and
// since when: the Ready condition true, no DiskPressure or
// NetworkUnavailable condition, and none of the not-ready taints. since is
// the latest transition among those conditions and taints.
func NodeReadiness(node *apiv1.Node) (ready bool, since time.Time) {
	ready, found := true, false
	later := func(t time.Time) {
		if t.After(since) {
			since = t
		}
	}
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case apiv1.NodeReady:
			found = true
			if c.Status != apiv1.ConditionTrue {
				ready = false
			}
			later(c.LastTransitionTime.Time)
		case apiv1.NodeDiskPressure, apiv1.NodeNetworkUnavailable:
			if c.Status == apiv1.ConditionTrue {
				ready = false
			}
			later(c.LastTransitionTime.Time)
		}
	}
	for _, t := range node.Spec.Taints {
		if notReadyTaints[t.Key] {
			ready = false
			if t.TimeAdded != nil {
				later(t.TimeAdded.Time)
			}
		}
	}
	if !found {
		// No Ready condition yet: a node that has only just registered.
		return false, node.CreationTimestamp.Time
	}
	return ready, since
}

// ResourceUnready tells a GPU node (one carrying gpuLabel) that advertises
// no GPU yet: its device plugin is still starting, which takes up to 15
// minutes after the node is Ready, or, on a cluster that runs a DRA driver
// instead (publishesDevices: the driver published the node's
// ResourceSlices), the driver has not published its devices yet. Like
// upstream (its GPU and DRA custom-resources processors), the autoscaler
// treats such a node as not ready, so that the pods waiting for its GPU
// count on it as upcoming instead of asking for another node.
func ResourceUnready(node *apiv1.Node, gpuLabel string, publishesDevices bool) bool {
	if gpuLabel == "" || publishesDevices {
		return false
	}
	if _, ok := node.Labels[gpuLabel]; !ok {
		return false
	}
	_, advertised := gpu.In(node.Status.Allocatable)
	return !advertised
}

// NodeGroupOptions returns the group's autoscaling options: its own when the
// provider has overrides, the process defaults otherwise. Zero fields in an
// override fall back to the defaults.
func NodeGroupOptions(g cloudprovider.NodeGroup, defaults config.NodeGroupAutoscalingOptions) config.NodeGroupAutoscalingOptions {
	o, err := g.GetOptions(defaults)
	if err != nil || o == nil {
		return defaults
	}
	out := *o
	if out.ScaleDownUtilizationThreshold == 0 {
		out.ScaleDownUtilizationThreshold = defaults.ScaleDownUtilizationThreshold
	}
	if out.ScaleDownGpuUtilizationThreshold == 0 {
		out.ScaleDownGpuUtilizationThreshold = defaults.ScaleDownGpuUtilizationThreshold
	}
	if out.ScaleDownUnneededTime == 0 {
		out.ScaleDownUnneededTime = defaults.ScaleDownUnneededTime
	}
	if out.ScaleDownUnreadyTime == 0 {
		out.ScaleDownUnreadyTime = defaults.ScaleDownUnreadyTime
	}
	if out.MaxNodeProvisionTime == 0 {
		out.MaxNodeProvisionTime = defaults.MaxNodeProvisionTime
	}
	return out
}
