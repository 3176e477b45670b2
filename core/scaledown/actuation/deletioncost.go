package actuation

import (
	"context"
	"encoding/json"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// UpdateDeletionCosts gives each pod of mark the deletion cost of a pod on
// an unneeded node (scaledown.PodDeletionCostKey, with
// scaledown.UnneededNodeKey naming the node) and takes both annotations
// off each pod of unmark, needed ones first, within the budget (as the soft
// taints: up to softTaintWorkers calls at once, none started once b.Time
// has passed). Every patch is conditional on the resourceVersion the
// caller read: a pod changed since (a deletion cost of its owner's, a
// newer object) answers Conflict, and the next loop decides again from
// the newer object. A pod gone answers NotFound, which is no error. A
// patch applied whose answer was lost shows in the next loop's pods.
func UpdateDeletionCosts(ctx context.Context, kube kubernetes.Interface, mark []scaledown.PodOnNode, unmark []*apiv1.Pod, b SoftTaintBudget, now func() time.Time) (res scaledown.DeletionCostResult) {
	start := now()
	type call struct {
		pod     *apiv1.Pod
		node    string // "": take the cost off
		started bool
		err     error
	}
	var calls []*call
	for _, p := range unmark {
		calls = append(calls, &call{pod: p})
	}
	for _, m := range mark {
		calls = append(calls, &call{pod: m.Pod, node: m.Node})
	}
	if len(calls) > b.Count {
		res.Skipped = len(calls) - max(b.Count, 0)
		calls = calls[:max(b.Count, 0)]
	}
	inTurn(calls, softTaintWorkers, func() bool { return now().Sub(start) < b.Time }, func(c *call) {
		c.started = true
		c.err = patchDeletionCost(ctx, kube, c.pod, c.node)
	})
	for _, c := range calls {
		switch {
		case !c.started:
			res.Skipped++
		case apierrors.IsNotFound(c.err):
		case apierrors.IsConflict(c.err):
			res.Skipped++
			klog.V(4).InfoS("Scale-down: pod changed since it was read; its deletion cost waits for the next loop", "pod", klog.KObj(c.pod))
		case c.err != nil:
			res.Errors = append(res.Errors, c.err)
			klog.InfoS("Scale-down: updating a pod's deletion cost failed", "pod", klog.KObj(c.pod), "unneededNode", c.node, "err", c.err)
		case c.node == "":
			res.Unmarked = append(res.Unmarked, klog.KObj(c.pod).String())
		default:
			res.Marked = append(res.Marked, klog.KObj(c.pod).String())
		}
	}
	if len(res.Marked) > 0 || len(res.Unmarked) > 0 {
		klog.V(1).InfoS("Scale-down: deletion costs of pods on unneeded nodes updated", "set", res.Marked, "removed", res.Unmarked, "waiting", res.Skipped)
	}
	return res
}

// patchDeletionCost sets (node != "") or removes pod's deletion cost and
// marker by a merge patch that holds only if the pod is still at the
// resourceVersion read. Removing keeps a cost the pod's owner set in
// place of ours.
func patchDeletionCost(ctx context.Context, kube kubernetes.Interface, pod *apiv1.Pod, node string) error {
	ann := map[string]any{scaledown.UnneededNodeKey: nil}
	switch {
	case node != "":
		ann[scaledown.UnneededNodeKey] = node
		ann[scaledown.PodDeletionCostKey] = scaledown.UnneededPodDeletionCost
	case pod.Annotations[scaledown.PodDeletionCostKey] == scaledown.UnneededPodDeletionCost:
		ann[scaledown.PodDeletionCostKey] = nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": pod.ResourceVersion, "annotations": ann}})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// DeletionCosts is UpdateDeletionCosts within --max-bulk-soft-taint-count
// and --max-bulk-soft-taint-time.
func (a *Actuator) DeletionCosts(ctx context.Context, mark []scaledown.PodOnNode, unmark []*apiv1.Pod) scaledown.DeletionCostResult {
	return UpdateDeletionCosts(ctx, a.deps.Kube, mark, unmark, SoftTaintBudget{Count: a.opts.MaxBulkSoftTaintCount, Time: a.opts.MaxBulkSoftTaintTime}, a.clock.Now)
}
