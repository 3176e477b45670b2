package consolidation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// Group is what candidate selection needs to know of a node's group.
type Group struct {
	ID string
	// Consolidate: the group's Consolidate option (the provider's say).
	Consolidate bool
	// UnneededTime: the group's --scale-down-unneeded-time.
	UnneededTime time.Duration
}

// CandidateInput is the cluster as candidate selection sees it.
type CandidateInput struct {
	Nodes      []*apiv1.Node
	PodsByNode map[string][]*apiv1.Pod
	// GroupOf returns a node's group; false for a node in none.
	GroupOf func(node string) (Group, bool)
	// Ready tells a node ready to run pods (unready nodes are scale-down's).
	Ready func(*apiv1.Node) bool
	// Price is a node's hourly price in USD.
	Price        func(*apiv1.Node) (float64, error)
	BeingDeleted map[string]bool
	// Held are the nodes another phase of this loop acted on or holds
	// (node name to phase): never a candidate.
	Held map[string]string
	// ScaleDownUnneeded tells a node scale-down found unneeded (nil:
	// none). Scale-down removes it once --scale-down-unneeded-time has
	// passed; consolidation taking it sooner would only cut that wait
	// short, and the wait is what keeps a node the load comes back to
	// (in one compressed day of issue 40, 12 of consolidation's 15 drains
	// were of nodes scale-down was waiting on).
	ScaleDownUnneeded func(node string) bool
	// Moved tells a pod whose workload consolidation moved within its
	// cooldown (Ledger.Recent; nil: none): its node is no candidate, so
	// no workload is disrupted twice within it.
	Moved func(*apiv1.Pod) bool
	// Limit keeps the first Limit candidates in order (0: all): the
	// planner tries no more (maxCandidates), and at 5,000 candidate nodes
	// sorting all of them, and listing the pods each would move, was a
	// fifth of a plan.
	Limit int
}

// Skipped is a node of a consolidatable group that is no candidate, and why.
type Skipped struct {
	Node, Why string
}

// Candidates returns the nodes consolidation may remove, in the order it
// tries them (fewest pods to move first, then the most expensive), the
// first in.Limit of them; why the other nodes of consolidatable groups
// are not candidates; and how many candidates there are before the limit.
// Nodes and pods marked not to be disrupted are never candidates.
func Candidates(in CandidateInput) (cands []Candidate, skipped []Skipped, total int) {
	var top candidateOrder
	for _, n := range in.Nodes {
		g, ok := in.GroupOf(n.Name)
		if !ok || !g.Consolidate {
			continue
		}
		why := ""
		switch {
		case in.Held[n.Name] != "":
			why = "held by " + in.Held[n.Name] + " in this loop"
		case in.BeingDeleted[n.Name] || clusterstate.HasToBeDeletedTaint(n):
			why = "being removed"
		case drain.NodeNotToDisrupt(n):
			why = fmt.Sprintf("annotation %s=true or %s=true", drain.ScaleDownDisabledKey, drain.DoNotDisruptKey)
		case !in.Ready(n):
			why = "not ready"
		case in.ScaleDownUnneeded != nil && in.ScaleDownUnneeded(n.Name):
			why = "unneeded for scale-down, which removes it after --scale-down-unneeded-time"
		}
		// One pass over the node's pods: the first marked not to be
		// disrupted, those a drain would move, and those of them whose
		// workload consolidation moved within its cooldown.
		var marked *apiv1.Pod
		count, moved := 0, 0
		if why == "" {
			for _, p := range in.PodsByNode[n.Name] {
				if drain.NotToDisrupt(p) {
					marked = p
					break
				}
				if !isMovable(p) {
					continue
				}
				count++
				if in.Moved != nil && in.Moved(p) {
					moved++
				}
			}
			if marked != nil {
				why = "pod " + marked.Namespace + "/" + marked.Name + " is marked not to be disrupted"
			}
		}
		price := 0.0
		if why == "" {
			var err error
			if price, err = in.Price(n); err != nil {
				why = "no price: " + err.Error()
			}
		}
		if why != "" {
			skipped = append(skipped, Skipped{Node: n.Name, Why: why})
			continue
		}
		if moved > 0 {
			skipped = append(skipped, Skipped{Node: n.Name, Why: fmt.Sprintf("holds %d pod(s) of workloads consolidation moved within --consolidation-workload-cooldown", moved)})
			continue
		}
		total++
		top.add(Candidate{Node: n, GroupID: g.ID, Price: price, Pods: count, UnneededTime: g.UnneededTime}, in.Limit)
	}
	cands = top
	if in.Limit <= 0 {
		slices.SortFunc(cands, compareCandidates)
	}
	for i := range cands {
		cands[i].Moving = movable(in.PodsByNode[cands[i].Node.Name])
	}
	return cands, skipped, total
}

// candidateOrder is candidates sorted in the order they are tried, kept
// to a limit as they are added.
type candidateOrder []Candidate

// add inserts c at its place; with limit > 0, past the limit the last
// goes. The order is total (the node's name last), so the result does not
// depend on the order the nodes are listed in.
func (o *candidateOrder) add(c Candidate, limit int) {
	if limit <= 0 {
		*o = append(*o, c) // sorted once, at the end
		return
	}
	if len(*o) == limit && compareCandidates(c, (*o)[limit-1]) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(*o, c, compareCandidates)
	*o = slices.Insert(*o, i, c)
	if len(*o) > limit {
		*o = (*o)[:limit]
	}
}

// compareCandidates orders candidates: fewest pods to move first, then the
// most expensive, then by name.
func compareCandidates(a, b Candidate) int {
	if a.Pods != b.Pods {
		return a.Pods - b.Pods
	}
	if a.Price != b.Price {
		if a.Price > b.Price {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Node.Name, b.Node.Name)
}

// notToDisrupt names the first pod marked never to be moved, "" if none.
func notToDisrupt(pods []*apiv1.Pod) string {
	for _, p := range pods {
		if drain.NotToDisrupt(p) {
			return p.Namespace + "/" + p.Name
		}
	}
	return ""
}
