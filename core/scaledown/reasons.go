package scaledown

import (
	"fmt"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// describeBlocking renders why a pod keeps its node, for operators.
func describeBlocking(bp *drain.BlockingPod) string {
	name := bp.Pod.Namespace + "/" + bp.Pod.Name
	var why string
	switch bp.Reason {
	case drain.NotSafeToEvictAnnotation:
		why = "has " + drain.SafeToEvictKey + "=false"
	case drain.NotEnoughPdb:
		why = "its PodDisruptionBudget allows no disruption now"
	case drain.LocalStorageRequested:
		why = "uses local storage (emptyDir or hostPath; --skip-nodes-with-local-storage)"
	case drain.NotReplicated:
		why = "has no controller that would recreate it"
	case drain.UnmovableKubeSystemPod:
		why = "is a kube-system pod without a PodDisruptionBudget (--skip-nodes-with-system-pods)"
	case drain.ControllerNotFound:
		why = "its controller no longer exists"
	case drain.MinReplicasReached:
		why = "its controller has fewer replicas than --min-replica-count"
	default:
		why = bp.Reason.String()
	}
	return fmt.Sprintf("pod %s: %s", name, why)
}

// describeUnremovable renders a failed removal simulation.
func describeUnremovable(u *simulator.UnremovableNode) string {
	if u.BlockingPod != nil && u.BlockingPod.Pod != nil {
		return describeBlocking(u.BlockingPod)
	}
	switch u.Reason {
	case simulator.NoPlaceToMovePods:
		return "its pods fit on no other node"
	case simulator.UnexpectedError:
		return "the removal simulation failed"
	}
	return u.Reason.String()
}
