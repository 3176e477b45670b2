// Package estimator answers "how many nodes like this template would these
// pods need", by placing the pods on simulated new nodes with the scheduler
// framework.
package estimator

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// BinpackingEstimator packs pods first-fit onto template nodes.
type BinpackingEstimator struct {
	checker  *simulator.PredicateChecker
	snapshot *simulator.ClusterSnapshot
}

// NewBinpackingEstimator returns an estimator working in forks of s. s holds
// the current cluster, so spreading and anti-affinity rules see the pods that
// already run.
func NewBinpackingEstimator(c *simulator.PredicateChecker, s *simulator.ClusterSnapshot) *BinpackingEstimator {
	return &BinpackingEstimator{checker: c, snapshot: s}
}

// Estimate returns how many nodes like template (at most maxNodes) the pods
// of groups need, and the pods that would schedule on them. template is used
// as given, including its pods (DaemonSet and static pods occupy every new
// node). Groups are packed largest pods first; each pod goes to the first new
// node it fits (newest first), and a new node is opened when it fits none. A
// group whose pod does not fit even a fresh node is dropped at once. Pods go
// only to new nodes. The snapshot is left as it was found.
func (e *BinpackingEstimator) Estimate(groups []simulator.PodEquivalenceGroup, template *framework.NodeInfo, maxNodes int) (int, []*apiv1.Pod) {
	if template == nil || template.Node() == nil || maxNodes <= 0 {
		return 0, nil
	}
	e.snapshot.Fork()
	defer e.snapshot.Revert()

	ordered := sortGroupsBySize(groups, template.Node())
	var open []string // newest first: the last node opened has the most room
	var placed []*apiv1.Pod
	serial := 0
	limitHit := false

	for _, g := range ordered {
		if len(g.Pods) == 0 {
			continue
		}
		// For groups whose fit can only get worse as pods are added (no pod
		// affinity, no spread constraints), a node that refused one pod
		// refuses the rest: skip it for them.
		monotone := fitOnlyShrinks(g.Pods[0])
		refused := map[string]bool{}
		for i, p := range g.Pods {
			candidates := open
			if monotone && len(refused) > 0 {
				candidates = make([]string, 0, len(open))
				for _, n := range open {
					if !refused[n] {
						candidates = append(candidates, n)
					}
				}
			}
			if len(candidates) > 0 {
				_, rejected, err := e.checker.ScheduleOnAnyNodeOf(e.snapshot, p, g.Pods[0], candidates)
				if monotone {
					for _, n := range rejected {
						refused[n] = true
					}
				}
				if err == nil {
					placed = append(placed, p)
					continue
				}
				var pe *simulator.PredicateError
				if errors.As(err, &pe) && pe.IsInternal() {
					klog.ErrorS(err, "Estimation: placing a pod failed", "template", template.Node().Name, "pod", klog.KObj(p))
					break
				}
			}
			if len(open) >= maxNodes {
				limitHit = true
				klog.V(4).InfoS("Estimation: max nodes reached, pods of a group left out", "template", template.Node().Name,
					"leftOut", len(g.Pods)-i, "pod", klog.KObj(p), "maxNodes", maxNodes)
				break
			}
			name, err := e.openNode(template, &serial)
			if err != nil {
				klog.ErrorS(err, "Estimation: opening a new node failed", "template", template.Node().Name)
				return len(open), placed
			}
			if perr := e.checker.SchedulePod(e.snapshot, p, g.Pods[0], name); perr != nil {
				if perr.IsInternal() {
					klog.ErrorS(perr, "Estimation: scheduling on a new node failed", "template", template.Node().Name)
					return len(open), placed
				}
				// It does not fit an empty new node: no equivalent pod ever will.
				if rerr := e.snapshot.RemoveNode(name); rerr != nil {
					klog.ErrorS(rerr, "Estimation: removing a new node failed", "template", template.Node().Name)
					return len(open), placed
				}
				klog.V(4).InfoS("Estimation: pod and its equivalent pods do not fit a new node", "template", template.Node().Name,
					"pod", klog.KObj(p), "equivalentPods", len(g.Pods)-i-1, "reason", perr.Error())
				break
			}
			open = append([]string{name}, open...)
			placed = append(placed, p)
		}
	}
	klog.V(3).InfoS("Estimation done", "template", template.Node().Name, "newNodes", len(open), "pods", len(placed),
		"maxNodes", maxNodes, "limitReached", limitHit)
	return len(open), placed
}

// openNode adds a fresh copy of template to the snapshot under an unused name.
func (e *BinpackingEstimator) openNode(template *framework.NodeInfo, serial *int) (string, error) {
	for {
		suffix := fmt.Sprintf("estimate-%d", *serial)
		*serial++
		if e.snapshot.HasNode(template.Node().Name + "-" + suffix) {
			continue
		}
		ni, err := simulator.SanitizedTemplateNodeInfo(template, suffix, nil, nil)
		if err != nil {
			return "", err
		}
		if err := e.snapshot.AddNodeInfo(ni); err != nil {
			return "", err
		}
		return ni.Node().Name, nil
	}
}

// fitOnlyShrinks reports whether nothing in the pod's constraints can be
// satisfied by adding pods, so that a node that refuses it keeps refusing
// equivalent pods.
func fitOnlyShrinks(p *apiv1.Pod) bool {
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		return false
	}
	if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
		return false
	}
	return true
}

// sortGroupsBySize orders groups by their exemplar's cpu and memory requests
// relative to the node's allocatable, largest first (stable).
func sortGroupsBySize(groups []simulator.PodEquivalenceGroup, node *apiv1.Node) []simulator.PodEquivalenceGroup {
	out := slices.Clone(groups)
	score := make([]float64, len(out))
	for i, g := range out {
		if len(g.Pods) > 0 {
			score[i] = simulator.SizeScore(g.Pods[0], node.Status.Allocatable)
		}
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	sorted := make([]simulator.PodEquivalenceGroup, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}
