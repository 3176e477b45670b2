package scaledown

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// PodDeletionCostKey is the annotation a ReplicaSet reads to choose
	// which of its pods to delete when it scales in: the lowest cost
	// first, after unscheduled, pending and unready pods (Kubernetes'
	// PodDeletionCost feature, beta and on by default since 1.22).
	PodDeletionCostKey = "controller.kubernetes.io/pod-deletion-cost"
	// UnneededNodeKey marks a pod whose deletion cost this autoscaler set,
	// and names the node it was set for: an unneeded node, or one that
	// consolidation's held command would remove. Only a pod carrying it
	// has its cost taken off again.
	UnneededNodeKey = "cluster-autoscaler.kubernetes.io/unneeded-node"
	// UnneededPodDeletionCost is the cost given: below the default 0 of a
	// pod without the annotation, so that a ReplicaSet scaling in deletes
	// its pods on unneeded nodes before the others.
	UnneededPodDeletionCost = "-100"
)

// unmarkedScanEvery is how often, with --pod-deletion-cost-on-unneeded-nodes
// off, a loop looks for pods an earlier run (or a replica that led before)
// gave a deletion cost: at 50,000 pods a look is about a millisecond, which
// a loop without the flag need not spend every 10 s.
const unmarkedScanEvery = 10 * time.Minute

// ScalesInByDeletionCost tells whether p's controller reads
// PodDeletionCostKey when it scales in: a ReplicaSet (a Deployment's);
// other controllers do not.
func ScalesInByDeletionCost(p *apiv1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.Kind == "ReplicaSet"
}

// PodOnNode is a pod and the unneeded node it runs on.
type PodOnNode struct {
	Pod  *apiv1.Pod
	Node string
}

// deletionCosts keeps --pod-deletion-cost-on-unneeded-nodes's annotation
// on the ReplicaSet pods that an unneeded node, or consolidation's held
// command (in.Planned), would have to evict (a Deployment scaling in then
// deletes them first, and the node may empty without an eviction), and
// takes it off the pods it marked whose node is needed again, or every pod
// it marked once the flag is off. Pods on nodes being removed, or whose
// removal this pass started, keep what they have: their eviction is under
// way. A pod with a deletion cost not set by this autoscaler is never
// touched. nil: nothing to do.
func (s *ScaleDown) deletionCosts(ctx context.Context, in PlannerInput, started ...[]string) *DeletionCostResult {
	podsByNode, now := in.PodsByNode, in.Now
	leaving := map[string]bool{}
	for name := range s.removals.BeingDeleted() {
		leaving[name] = true
	}
	for _, names := range started {
		for _, n := range names {
			leaving[n] = true
		}
	}
	// The pods to mark, in the unneeded nodes' order (the longest unneeded
	// first), so that a budget spent leaves the latest for the next loop.
	want := map[types.UID]bool{}
	var mark []PodOnNode
	if s.opts.PodDeletionCostOnUnneededNodes {
		// Consolidation's command after scale-down's unneeded nodes, a
		// node in both once.
		nodes := make([]string, 0, len(s.planner.Unneeded())+len(in.Planned))
		toEvict := make(map[string][]*apiv1.Pod, cap(nodes))
		for _, u := range s.planner.Unneeded() {
			nodes = append(nodes, u.Node.Name)
			toEvict[u.Node.Name] = u.PodsToEvict
		}
		for _, name := range slices.Sorted(maps.Keys(in.Planned)) {
			if _, dup := toEvict[name]; !dup {
				nodes = append(nodes, name)
				toEvict[name] = in.Planned[name]
			}
		}
		for _, name := range nodes {
			if leaving[name] {
				continue
			}
			evict := map[types.UID]bool{}
			for _, p := range toEvict[name] {
				if ScalesInByDeletionCost(p) {
					evict[p.UID] = true
				}
			}
			// The loop's own objects: their resourceVersion is the
			// patch's condition.
			for _, p := range podsByNode[name] {
				if !evict[p.UID] {
					continue
				}
				want[p.UID] = true
				_, ours := p.Annotations[UnneededNodeKey]
				if _, hasCost := p.Annotations[PodDeletionCostKey]; !ours && !hasCost {
					mark = append(mark, PodOnNode{Pod: p, Node: name})
				}
			}
		}
	}
	// Every pod is looked at with the flag on; with it off (the default),
	// only every unmarkedScanEvery, for pods an earlier run marked.
	var unmark []*apiv1.Pod
	if s.opts.PodDeletionCostOnUnneededNodes || s.lastMarkScan.IsZero() || now.Sub(s.lastMarkScan) >= unmarkedScanEvery {
		s.lastMarkScan = now
		for node, pods := range podsByNode {
			if leaving[node] {
				continue
			}
			for _, p := range pods {
				if _, ours := p.Annotations[UnneededNodeKey]; ours && !want[p.UID] {
					unmark = append(unmark, p)
				}
			}
		}
		slices.SortFunc(unmark, func(a, b *apiv1.Pod) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
	}
	if len(mark) == 0 && len(unmark) == 0 {
		return nil
	}
	res := s.actuator.DeletionCosts(ctx, mark, unmark)
	return &res
}
