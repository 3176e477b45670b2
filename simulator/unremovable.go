package simulator

import "strconv"

// UnremovableReason says why a node cannot be removed now. The values and
// their order are upstream's (its simulator.UnremovableReason, 1.36):
// upstream exports unremovable_nodes_count{reason} with the number as the
// label, and so does this project (see Label), so dashboards and alerts
// written against upstream select the same series.
type UnremovableReason int

const (
	// NoReason is the zero value; never set on purpose.
	NoReason UnremovableReason = iota
	// ScaleDownDisabledAnnotation: the node has
	// cluster-autoscaler.kubernetes.io/scale-down-disabled=true.
	ScaleDownDisabledAnnotation
	// ScaleDownUnreadyDisabled: unready, and --scale-down-unready-enabled=false.
	ScaleDownUnreadyDisabled
	// NotAutoscaled: the node is in no node group.
	NotAutoscaled
	// NotUnneededLongEnough: unneeded for less than --scale-down-unneeded-time.
	NotUnneededLongEnough
	// NotUnreadyLongEnough: unready for less than --scale-down-unready-time.
	NotUnreadyLongEnough
	// NodeGroupMinSizeReached: its node group would go below its min size.
	NodeGroupMinSizeReached
	// NodeGroupMaxDeletionCountReached: upstream's per-group deletion cap
	// (not used here: no DigitalOcean group sets one).
	NodeGroupMaxDeletionCountReached
	// AtomicScaleDownFailed: upstream's all-or-nothing groups (not used here).
	AtomicScaleDownFailed
	// MinimalResourceLimitExceeded: the cluster would go below
	// --cores-total / --memory-total minimums.
	MinimalResourceLimitExceeded
	// CurrentlyBeingDeleted: already being removed.
	CurrentlyBeingDeleted
	// NotUnderutilized: utilization at or above the threshold.
	NotUnderutilized
	// NotUnneededOtherReason: not examined this loop (candidate limits).
	NotUnneededOtherReason
	// RecentlyUnremovable: upstream's recheck timeout (not used here).
	RecentlyUnremovable
	// NoPlaceToMovePods: some pod to move fits no other node.
	NoPlaceToMovePods
	// BlockedByPod: a pod may not be moved (see BlockingPod.Reason).
	BlockedByPod
	// UnexpectedError: the simulation itself failed.
	UnexpectedError
	// NoNodeInfo: the node is not in the cluster snapshot.
	NoNodeInfo
)

var unremovableReasonNames = [...]string{
	"NoReason", "ScaleDownDisabledAnnotation", "ScaleDownUnreadyDisabled", "NotAutoscaled",
	"NotUnneededLongEnough", "NotUnreadyLongEnough", "NodeGroupMinSizeReached",
	"NodeGroupMaxDeletionCountReached", "AtomicScaleDownFailed", "MinimalResourceLimitExceeded",
	"CurrentlyBeingDeleted", "NotUnderutilized", "NotUnneededOtherReason", "RecentlyUnremovable",
	"NoPlaceToMovePods", "BlockedByPod", "UnexpectedError", "NoNodeInfo",
}

// String is the reason's upstream name, for logs.
func (r UnremovableReason) String() string {
	if r >= 0 && int(r) < len(unremovableReasonNames) {
		return unremovableReasonNames[r]
	}
	return "UnremovableReason(" + strconv.Itoa(int(r)) + ")"
}

// Label is the value of unremovable_nodes_count's reason label: the
// number, as upstream's metric prints it.
func (r UnremovableReason) Label() string { return strconv.Itoa(int(r)) }
