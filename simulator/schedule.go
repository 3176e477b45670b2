package simulator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// ScheduledPod is a pod and the node the simulation put it on.
type ScheduledPod struct {
	Pod      *apiv1.Pod
	NodeName string
}

// PodEquivalenceGroup holds pods the scheduler cannot tell apart: same
// controller and same scheduling-relevant spec. Pods[0] is the exemplar.
type PodEquivalenceGroup struct {
	Pods []*apiv1.Pod
}

// Exemplar is the group's first pod.
func (g PodEquivalenceGroup) Exemplar() *apiv1.Pod {
	if len(g.Pods) == 0 {
		return nil
	}
	return g.Pods[0]
}

// GroupPods groups pods by controller UID and a hash of what the scheduler
// looks at (labels, requests, node selector, affinity, tolerations, spread
// constraints, ports, volumes, ...). Pods without a controller are grouped
// by that hash alone: upstream gives each its own group, but a filter's
// answer depends only on what the hash covers, and bare pods come in bulk
// (Kueue's plain-pod groups, batch systems): 5,000 of them were 5,000 passes
// over every node. Groups come out in order of first appearance.
func GroupPods(pods []*apiv1.Pod) []PodEquivalenceGroup {
	type key struct {
		owner types.UID
		hash  uint64
	}
	index := map[key]int{}
	var groups []PodEquivalenceGroup
	for _, p := range pods {
		if p == nil {
			continue
		}
		k := key{hash: schedulingHash(p)}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			k.owner = ref.UID
		}
		if i, found := index[k]; found {
			groups[i].Pods = append(groups[i].Pods, p)
			continue
		}
		index[k] = len(groups)
		groups = append(groups, PodEquivalenceGroup{Pods: []*apiv1.Pod{p}})
	}
	return groups
}

// schedulingView is what the filter plugins read from a pod. Two pods with
// the same view and the same owner get the same answer everywhere.
type schedulingView struct {
	Namespace                 string
	Labels                    map[string]string
	NodeName                  string
	NodeSelector              map[string]string
	Affinity                  *apiv1.Affinity
	Tolerations               []apiv1.Toleration
	TopologySpreadConstraints []apiv1.TopologySpreadConstraint
	Volumes                   []apiv1.Volume
	Containers                []containerView
	InitContainers            []containerView
	Overhead                  apiv1.ResourceList
	Resources                 *apiv1.ResourceRequirements
	ResourceClaims            []apiv1.PodResourceClaim
	HostNetwork               bool
	SchedulerName             string
	PriorityClassName         string
}

type containerView struct {
	Resources     apiv1.ResourceRequirements
	Ports         []apiv1.ContainerPort
	RestartPolicy *apiv1.ContainerRestartPolicy
}

func schedulingHash(p *apiv1.Pod) uint64 {
	v := schedulingView{
		Namespace:                 p.Namespace,
		Labels:                    p.Labels,
		NodeName:                  p.Spec.NodeName,
		NodeSelector:              p.Spec.NodeSelector,
		Affinity:                  p.Spec.Affinity,
		Tolerations:               p.Spec.Tolerations,
		TopologySpreadConstraints: p.Spec.TopologySpreadConstraints,
		Volumes:                   p.Spec.Volumes,
		Overhead:                  p.Spec.Overhead,
		Resources:                 p.Spec.Resources,
		ResourceClaims:            p.Spec.ResourceClaims,
		HostNetwork:               p.Spec.HostNetwork,
		SchedulerName:             p.Spec.SchedulerName,
		PriorityClassName:         p.Spec.PriorityClassName,
	}
	for _, c := range p.Spec.Containers {
		v.Containers = append(v.Containers, containerView{Resources: c.Resources, Ports: c.Ports})
	}
	for _, c := range p.Spec.InitContainers {
		v.InitContainers = append(v.InitContainers, containerView{Resources: c.Resources, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
	}
	// JSON sorts map keys, so equal views give equal bytes.
	b, err := json.Marshal(v)
	if err != nil {
		// Cannot happen for API types; fall back to a value unique to the pod
		// so that it is at worst its own group.
		b = []byte(fmt.Sprintf("%p", p))
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// TrySchedulePods places pods on the snapshot's nodes, first fit in the
// snapshot's node order, adding each placed pod to the snapshot so later
// pods see it. Once a pod of an equivalence group fits nowhere, the rest of
// the group is reported unschedulable without being tried; a group also
// resumes its search at the node where its previous pod landed (wrapping
// around, so no node is skipped).
func TrySchedulePods(c *PredicateChecker, s *ClusterSnapshot, pods []*apiv1.Pod) (scheduled []ScheduledPod, unschedulable []*apiv1.Pod, err error) {
	return trySchedulePods(c, s, pods, nil)
}

// TrySchedulePodsOnNew is TrySchedulePods for pods that fit none of the
// snapshot's nodes before the nodes in added were added (the pods a
// scale-up still has to place once upcoming nodes are in the snapshot).
// Such a pod's fit on an older node can only have changed if it depends on
// other nodes: inter-pod affinity or anti-affinity, topology spread, or
// resource claims (devices not local to a node). Those pods try every
// node; the others try only the added ones, so thousands of full nodes are
// not filtered again.
func TrySchedulePodsOnNew(c *PredicateChecker, s *ClusterSnapshot, pods []*apiv1.Pod, added map[string]bool) (scheduled []ScheduledPod, unschedulable []*apiv1.Pod, err error) {
	onAdded := func(info *schedframework.NodeInfo) bool { return added[info.Node().Name] }
	return trySchedulePods(c, s, pods, func(p *apiv1.Pod) func(*schedframework.NodeInfo) bool {
		if dependsOnOtherNodes(p) {
			return nil
		}
		return onAdded
	})
}

// dependsOnOtherNodes says whether p's fit on a node can depend on other
// nodes and their pods.
func dependsOnOtherNodes(p *apiv1.Pod) bool {
	a := p.Spec.Affinity
	return (a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)) ||
		len(p.Spec.TopologySpreadConstraints) > 0 || len(p.Spec.ResourceClaims) > 0
}

// SizeScore is how large p is for nodes with alloc: its cpu and memory
// requests as shares of alloc's, summed. Packing largest first (first-fit
// decreasing) is how the estimator buys nodes.
func SizeScore(p *apiv1.Pod, alloc apiv1.ResourceList) float64 {
	req := framework.PodRequests(p)
	score := 0.0
	if cpu := alloc.Cpu().MilliValue(); cpu > 0 {
		score += float64(req.Cpu().MilliValue()) / float64(cpu)
	}
	if mem := alloc.Memory().Value(); mem > 0 {
		score += float64(req.Memory().Value()) / float64(mem)
	}
	return score
}

// PackingOrder returns pods in the order to pack them on nodes with alloc:
// higher priority first, as upstream packs pending pods on free capacity;
// within a priority, largest first (SizeScore), as the estimator packed
// them when it bought nodes (stable).
func PackingOrder(pods []*apiv1.Pod, alloc apiv1.ResourceList) []*apiv1.Pod {
	out := slices.Clone(pods)
	score := make(map[*apiv1.Pod]float64, len(out))
	for _, p := range out {
		score[p] = SizeScore(p, alloc)
	}
	slices.SortStableFunc(out, func(a, b *apiv1.Pod) int {
		if c := cmp.Compare(priority(b), priority(a)); c != 0 {
			return c
		}
		return cmp.Compare(score[b], score[a])
	})
	return out
}

func priority(p *apiv1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// trySchedulePods is TrySchedulePods with, per equivalence group, the
// nodes it may try (candidates of its first pod; nil: every node).
func trySchedulePods(c *PredicateChecker, s *ClusterSnapshot, pods []*apiv1.Pod, candidates func(*apiv1.Pod) func(*schedframework.NodeInfo) bool) (scheduled []ScheduledPod, unschedulable []*apiv1.Pod, err error) {
	for _, g := range GroupPods(pods) {
		hint := 0
		failed := false
		// The group's pods are equivalent: one class of the memo.
		shared := preFilterMemo{}
		var match func(*schedframework.NodeInfo) bool
		if candidates != nil {
			match = candidates(g.Pods[0])
		}
		for _, p := range g.Pods {
			if failed {
				unschedulable = append(unschedulable, p)
				continue
			}
			idx, nodeName, pf, ferr := c.fitsAnyNodeShared(s, p, match, hint, shared, 0)
			if ferr != nil {
				if pe, ok := ferr.(*PredicateError); ok && pe.IsInternal() {
					return scheduled, unschedulable, fmt.Errorf("simulating pod %s: %w", podKey(p), ferr)
				}
				klog.V(4).InfoS("Pod does not fit any node; its equivalent pods not tried", "pod", klog.KObj(p), "reason", ferr.Error(), "equivalentPods", len(g.Pods)-1)
				failed = true
				unschedulable = append(unschedulable, p)
				continue
			}
			if perr := c.place(s, pf, p, g.Pods[0], nodeName); perr != nil {
				return scheduled, unschedulable, fmt.Errorf("simulating pod %s: %w", podKey(p), perr)
			}
			hint = idx
			scheduled = append(scheduled, ScheduledPod{Pod: p, NodeName: nodeName})
		}
	}
	klog.V(3).InfoS("Scheduling simulation done", "fitExistingNodes", len(scheduled), "fitNoNode", len(unschedulable))
	return scheduled, unschedulable, nil
}

// withNodeName returns a shallow copy of p bound to nodeName, so pods stored
// in the snapshot say where they are without the caller's object changing.
func withNodeName(p *apiv1.Pod, nodeName string) *apiv1.Pod {
	if p.Spec.NodeName == nodeName {
		return p
	}
	cp := *p
	cp.Spec.NodeName = nodeName
	return &cp
}
