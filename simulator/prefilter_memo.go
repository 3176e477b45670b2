package simulator

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// preFilterMemo keeps, for one pass of simulations (a planner's removal
// simulations, a group of equivalent pending pods), PreFilter's outcome per
// class of equivalent pods (schedulingHash), for the classes whose outcome
// reads nothing but the pod. A removal simulation checks every pod it
// moves, and PreFilter was most of each check: NodeResourcesFit sums the
// pod's requests again, the framework builds its skip sets, InterPodAffinity
// parses the pod, for pods of one ReplicaSet whose outcome is the same each
// time.
//
// Such an outcome is one where every PreFilter plugin that ran for the pod
// is one of podOnlyPreFilters, and every other one skipped it:
//   - PodTopologySpread skips a pod without DoNotSchedule constraints (its
//     own, or the profile's defaults, which read Services and ReplicaSets,
//     not the snapshot);
//   - the volume plugins, a pod without the volumes they check;
//   - DynamicResources (cheapDRASkip), a pod that needs no device;
//   - InterPodAffinity, a pod without pod (anti-)affinity terms, while no
//     pod in the snapshot has required anti-affinity. The memo's answer is
//     therefore given only while the snapshot has no such pod.
//
// Equivalent pods share the skips: schedulingHash covers the fields these
// plugins read (volumes, claims, resources, affinity, constraints, labels,
// namespace). A pod whose resize the kubelet deferred is skipped by every
// snapshot-reading plugin regardless of its spec (the scheduler's in-place
// resize preemption), so it neither fills nor reads the memo. The memo lives
// for one pass: the profile's default constraints read informers, which
// move between loops.
type preFilterMemo map[uint64]*preFilterOutcome

// podOnlyPreFilters are the PreFilter plugins whose outcome is a function of
// the pod and the plugin's arguments (NodeUnschedulable and TaintToleration
// skip only a pod whose resize is deferred; NodeName restricts a pod to
// spec.nodeName).
var podOnlyPreFilters = sets.New(names.NodeUnschedulable, names.NodeName, names.TaintToleration,
	names.NodeAffinity, names.NodePorts, names.NodeResourcesFit)

// preFilterShared is preFilter for a pod of equivalence class key, answered
// from memo (nil: no memo) when an equivalent pod's outcome holds for it.
// The outcome is shared: Filter only reads it, and pods that reach Reserve
// (those with devices) never share one.
func (c *PredicateChecker) preFilterShared(s *ClusterSnapshot, pod *apiv1.Pod, memo preFilterMemo, key uint64) (*preFilterOutcome, *PredicateError) {
	if memo == nil || resource.IsPodResizeDeferred(pod) {
		return c.preFilter(s, pod)
	}
	if pf := memo[key]; pf != nil {
		c.lister.snapshot = s
		s.prepareForScheduling()
		if _, anti, _ := s.affinityLists(); len(anti) == 0 {
			return pf, nil
		}
	}
	pf, perr := c.preFilter(s, pod)
	if perr == nil && c.readsOnlyThePod(pf) {
		memo[key] = pf
	}
	return pf, perr
}

// readsOnlyThePod reports whether every PreFilter plugin that ran is one of
// podOnlyPreFilters (see preFilterMemo).
func (c *PredicateChecker) readsOnlyThePod(pf *preFilterOutcome) bool {
	skipped := pf.state.GetSkipFilterPlugins()
	for _, name := range c.preFilterPlugins {
		if !podOnlyPreFilters.Has(name) && !skipped.Has(name) {
			return false
		}
	}
	return true
}
