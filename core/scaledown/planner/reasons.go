package planner

import (
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

// describeUnremovable renders a failed removal simulation.
func describeUnremovable(u *simulator.UnremovableNode) string {
	if u.BlockingPod != nil && u.BlockingPod.Pod != nil {
		return scaledown.DescribeBlocking(u.BlockingPod)
	}
	switch u.Reason {
	case simulator.NoPlaceToMovePods:
		return "its pods fit on no other node"
	case simulator.UnexpectedError:
		return "the removal simulation failed"
	}
	return u.Reason.String()
}
