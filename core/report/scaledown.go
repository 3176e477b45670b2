package report

import (
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// The scale-down case: one pass's result (ScaleDown, after the pass) and
// each removal step as it happens (the scaledown.Outcomes methods, called
// from the removals' goroutines).

var _ scaledown.Outcomes = (*Reporter)(nil)

// ScaleDown records one scale-down pass at now: the candidates in the
// registry (status ConfigMap), the unneeded, unremovable, cooldown and
// skipped-removal metrics, the pass's durations and the removals left in
// flight; with err, only the durations, the removals in flight and the
// error.
func (r *Reporter) ScaleDown(now time.Time, res scaledown.Result, err error) {
	metrics.UpdateDuration(metrics.FindUnneeded, res.Planned.Took)
	if err == nil {
		r.registry.SetScaleDownCandidates(res.Planned.ByGroup)
		metrics.UpdateUnneededNodesCount(res.Planned.Unneeded)
		metrics.UpdateScaleDownInCooldown(res.InCooldown)
		for _, s := range res.Skipped {
			metrics.RegisterSkippedScaleDown(skippedLabel(s.Minimum))
		}
		metrics.UpdateUnremovableNodesCount(res.Unremovable)
		if res.SoftTaints != nil {
			metrics.UpdateDuration(metrics.ScaleDownSoftTaintUnneeded, res.SoftTaints.Took)
		}
	}
	metrics.UpdateDuration(metrics.ScaleDown, res.Took)
	metrics.ObservePendingNodeDeletions(res.InFlight)
	if err != nil {
		metrics.RegisterError(metrics.InternalError)
		return
	}
	if res.Started() {
		metrics.UpdateLastTime(metrics.ActivityScaleDown, now)
	}
}

// ScaleDownOff records a loop with scale-down disabled: no candidates.
func (r *Reporter) ScaleDownOff() {
	r.registry.SetScaleDownCandidates(nil)
}

// RemovalsStarted records, on the status ConfigMap, a ScaleDownEmpty event
// per empty node or a ScaleDown event per tainted node to drain.
func (r *Reporter) RemovalsStarted(s scaledown.RemovalStart) {
	for _, u := range s.Nodes {
		if s.Drain {
			r.events.Eventf(r.status, apiv1.EventTypeNormal, "ScaleDown", "Scale-down: removing node %s, utilization: %s, pods to reschedule: %s",
				u.Node.Name, describeUtilization(u.Utilization), framework.PodNames(u.PodsToEvict, 0))
		} else {
			r.events.Eventf(r.status, apiv1.EventTypeNormal, "ScaleDownEmpty", "Scale-down: removing empty node %q", u.Node.Name)
		}
	}
}

// describeUtilization renders a node's utilization for the ScaleDown event.
func describeUtilization(u utilization.Info) string {
	return fmt.Sprintf("{cpu: %.2f, memory: %.2f, gpu: %.2f, utilization: %.2f (%s)}", u.CpuUtil, u.MemUtil, u.GpuUtil, u.Utilization, scaledown.ResourceLabel(u))
}

// NodeTainted records the node's ScaleDown event.
func (r *Reporter) NodeTainted(n *apiv1.Node) {
	r.events.Event(n, apiv1.EventTypeNormal, "ScaleDown", "marked the node as toBeDeleted/unschedulable")
}

// PodEvicted records the pod's ScaleDown event.
func (r *Reporter) PodEvicted(p *apiv1.Pod) {
	r.events.Event(p, apiv1.EventTypeNormal, "ScaleDown", "deleting pod for node scale down")
}

// EvictionsEnded counts the evictions (evicted_pods_total).
func (r *Reporter) EvictionsEnded(e scaledown.Evictions) {
	metrics.RegisterEvictions(e.Succeeded, true)
	if e.Failed > 0 {
		metrics.RegisterEvictions(e.Failed, false)
	}
}

// RemovalFailed counts the error and records the node's ScaleDownFailed
// event.
func (r *Reporter) RemovalFailed(f scaledown.RemovalFailure) {
	metrics.RegisterError(failureType(f.Kind))
	r.events.Eventf(f.Node, apiv1.EventTypeWarning, "ScaleDownFailed", "failed to remove node: %v", f.Err)
}

// failureType is the errors_total type of a failed removal.
func failureType(k scaledown.FailureKind) string {
	switch k {
	case scaledown.FailedCloudProvider:
		return metrics.CloudProviderError
	case scaledown.FailedInternal:
		return metrics.InternalError
	case scaledown.FailedTransient:
		return metrics.TransientError
	}
	return metrics.APICallError
}

// NodeRemoved counts the node in scaled_down_nodes_total (with its GPU and
// DRA labels) and records its ScaleDown event.
func (r *Reporter) NodeRemoved(u *scaledown.UnneededNode) {
	gpuName, gpuType := cloudprovider.GPULabels(r.provider, u.Node)
	metrics.RegisterScaleDown(1, scaleDownReason(u), gpuName, gpuType, u.DRADrivers)
	r.events.Event(u.Node, apiv1.EventTypeNormal, "ScaleDown", "node removed by cluster autoscaler")
}

// scaleDownReason is the scaled_down_nodes_total reason of a removal.
func scaleDownReason(u *scaledown.UnneededNode) string {
	switch {
	case u.Unready:
		return metrics.ScaleDownUnready
	case u.Empty:
		return metrics.ScaleDownEmpty
	}
	return metrics.ScaleDownUnderutilized
}
