// Package pending sorts the cluster's pods that wait for a node: which the
// scale-up phase acts on (old enough, not expendable), which wait for
// preemption on a nominated node, and which are being evicted from nodes
// under drain and need room as much.
package pending

import (
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// PodScaleUpDelayAnnotation overrides --new-pod-scale-up-delay for one pod.
const PodScaleUpDelayAnnotation = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"

// Pods sorts the cluster's pods that wait for a node.
type Pods struct {
	// Eligible: unschedulable, old enough, not expendable.
	Eligible []*apiv1.Pod
	// TooYoung: unschedulable but younger than their scale-up delay.
	TooYoung int
	// Expendable: unschedulable with priority below the cutoff.
	Expendable int
	// Nominated: unschedulable pods waiting for the preemption of lower
	// priority pods on the node in their status.nominatedNodeName, a node
	// of the cluster. As upstream, they are placed on that node in the
	// simulation, whether they fit it or not, and never cause a scale-up.
	Nominated []*apiv1.Pod
	// SchedulerUnprocessed: unbound pods the scheduler has not marked
	// either way yet (no PodScheduled condition).
	SchedulerUnprocessed int
}

// IsUnschedulable reports whether the scheduler marked the pod
// PodScheduled=False/Unschedulable and it is not bound or terminating.
func IsUnschedulable(p *apiv1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
		return false
	}
	if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return c.Status == apiv1.ConditionFalse && c.Reason == apiv1.PodReasonUnschedulable
		}
	}
	return false
}

// Filter picks, from all pods, the unschedulable ones that may
// cause a scale-up at now; nodeExists tells a node of the cluster by name.
func Filter(pods []*apiv1.Pod, opts config.AutoscalingOptions, now time.Time, nodeExists func(string) bool) Pods {
	var out Pods
	for _, p := range pods {
		if !IsUnschedulable(p) {
			if isUnprocessed(p) {
				out.SchedulerUnprocessed++
			}
			continue
		}
		if drain.Expendable(p, opts.ExpendablePodsPriorityCutoff) {
			out.Expendable++
			continue
		}
		if WaitsForPreemption(p, nodeExists) {
			out.Nominated = append(out.Nominated, p)
			continue
		}
		if now.Sub(p.CreationTimestamp.Time) < scaleUpDelay(p, opts.NewPodScaleUpDelay) {
			out.TooYoung++
			continue
		}
		out.Eligible = append(out.Eligible, p)
	}
	// Oldest first, in a stable order: when not every pod can be helped the
	// ones waiting longest are, and events go to the same pods each loop.
	sort.Slice(out.Eligible, func(i, j int) bool {
		a, b := out.Eligible[i], out.Eligible[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// Drained returns, as pending pods, the pods being evicted from the
// nodes the autoscaler drains: their controllers will recreate them and the
// scheduler must find them room, so the simulation places them first, as
// upstream's currently-drained-nodes pod list processor does. Without this a
// removal right after a drain would count their destination as free. Pods
// already terminating are left out (their replacement is pending already),
// and so are pods nothing recreates (mirror, DaemonSet), those that
// finished, and expendable ones, which take no room in the simulation. The
// returned pods are copies with no node name.
func Drained(pods []*apiv1.Pod, draining map[string]bool, expendableCutoff int) []*apiv1.Pod {
	if len(draining) == 0 {
		return nil
	}
	var out []*apiv1.Pod
	for _, p := range pods {
		if !draining[p.Spec.NodeName] || p.DeletionTimestamp != nil ||
			p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed ||
			drain.IsMirrorPod(p) || drain.IsDaemonSetPod(p) || drain.Expendable(p, expendableCutoff) {
			continue
		}
		moved := p.DeepCopy()
		moved.Spec.NodeName = ""
		out = append(out, moved)
	}
	return out
}

// WaitsForPreemption tells a pending pod the scheduler nominated for a node
// of the cluster, where it waits for lower priority pods to go. A pod
// nominated for a node that no longer exists waits for nothing: it is an
// ordinary pending pod.
func WaitsForPreemption(p *apiv1.Pod, nodeExists func(string) bool) bool {
	n := p.Status.NominatedNodeName
	if n == "" {
		return false
	}
	if nodeExists(n) {
		klog.V(4).InfoS("Pod waits for lower priority pods to be preempted; ignoring it in scale-up", "pod", klog.KObj(p), "nominatedNode", klog.KRef("", n))
		return true
	}
	klog.V(4).InfoS("Pod's nominated node is gone", "pod", klog.KObj(p), "nominatedNode", klog.KRef("", n))
	return false
}

// isUnprocessed reports whether the pod is live, unbound and has no
// PodScheduled condition.
func isUnprocessed(p *apiv1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return false
		}
	}
	return true
}

// scaleUpDelay returns the pod's own annotation when valid and not shorter than the
// global delay (as upstream, a pod may ask to wait longer, not to skip the
// cluster's delay), the global delay otherwise.
func scaleUpDelay(p *apiv1.Pod, global time.Duration) time.Duration {
	v, ok := p.Annotations[PodScaleUpDelayAnnotation]
	if !ok {
		return global
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		klog.InfoS("Pod's scale-up delay annotation is invalid; using --new-pod-scale-up-delay", "pod", klog.KObj(p), "annotation", PodScaleUpDelayAnnotation, "value", v, "delay", global)
		return global
	}
	if d < global {
		klog.V(2).InfoS("Pod's scale-up delay annotation is shorter than --new-pod-scale-up-delay; using the flag", "pod", klog.KObj(p), "annotation", PodScaleUpDelayAnnotation, "value", d, "delay", global)
		return global
	}
	return d
}
