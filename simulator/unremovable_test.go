package simulator

import "testing"

// The numbers are upstream's (simulator/cluster.go, 1.36): they are the
// reason label of unremovable_nodes_count, which dashboards select on.
func TestUnremovableReasonsKeepUpstreamNumbers(t *testing.T) {
	for _, tc := range []struct {
		reason UnremovableReason
		label  string
		name   string
	}{
		{ScaleDownDisabledAnnotation, "1", "ScaleDownDisabledAnnotation"},
		{ScaleDownUnreadyDisabled, "2", "ScaleDownUnreadyDisabled"},
		{NotAutoscaled, "3", "NotAutoscaled"},
		{NotUnneededLongEnough, "4", "NotUnneededLongEnough"},
		{NotUnreadyLongEnough, "5", "NotUnreadyLongEnough"},
		{NodeGroupMinSizeReached, "6", "NodeGroupMinSizeReached"},
		{MinimalResourceLimitExceeded, "9", "MinimalResourceLimitExceeded"},
		{CurrentlyBeingDeleted, "10", "CurrentlyBeingDeleted"},
		{NotUnderutilized, "11", "NotUnderutilized"},
		{NotUnneededOtherReason, "12", "NotUnneededOtherReason"},
		{NoPlaceToMovePods, "14", "NoPlaceToMovePods"},
		{BlockedByPod, "15", "BlockedByPod"},
		{UnexpectedError, "16", "UnexpectedError"},
		{NoNodeInfo, "17", "NoNodeInfo"},
	} {
		if got := tc.reason.Label(); got != tc.label {
			t.Errorf("%s label = %s, want upstream's %s", tc.name, got, tc.label)
		}
		if got := tc.reason.String(); got != tc.name {
			t.Errorf("reason %s String() = %s, want %s", tc.label, got, tc.name)
		}
	}
	if got := UnremovableReason(99).String(); got != "UnremovableReason(99)" {
		t.Errorf("unknown reason renders as %q", got)
	}
}
