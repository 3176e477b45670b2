package clusterstate

import (
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// Taints the autoscaler puts on nodes it removes.
const (
	// ToBeDeletedTaint marks a node being drained and deleted (NoSchedule;
	// the value is the unix time the taint was added).
	ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
	// DeletionCandidateTaint is upstream's soft (PreferNoSchedule) taint on
	// unneeded nodes. This autoscaler never sets it, but removes it at
	// start-up in case an upstream autoscaler ran before.
	DeletionCandidateTaint = "DeletionCandidateOfClusterAutoscaler"
)

// MaxNodeStartupTime is how long after creation an unready node counts as
// "not started" rather than unready (upstream's --max-node-startup-time
// default; this project does not expose the flag).
const MaxNodeStartupTime = 15 * time.Minute

// HasToBeDeletedTaint reports whether the node carries ToBeDeletedTaint.
func HasToBeDeletedTaint(node *apiv1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return true
		}
	}
	return false
}

// NodeReadiness tells whether the node is Ready and since when its Ready
// condition has had its current value.
func NodeReadiness(node *apiv1.Node) (ready bool, since time.Time) {
	for _, c := range node.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	// No Ready condition yet: a node that has only just registered.
	return false, node.CreationTimestamp.Time
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
