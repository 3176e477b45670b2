package scaleup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
)

// Reason says why a node group would not help a pod. The constants are
// the autoscaler's own; the scheduler's reasons (a failed predicate, as
// "Insufficient cpu") are carried as they come.
type Reason string

// Reasons a node group cannot help, as shown in NotTriggerScaleUp events.
const (
	ReasonMaxSize       Reason = "max node group size reached"
	ReasonBackoff       Reason = "in backoff after failed scale-up"
	ReasonUnhealthy     Reason = "node group unhealthy"
	ReasonNoTemplate    Reason = "no node template"
	ReasonMaxNodesTotal Reason = "max total nodes in cluster reached"
	ReasonMaxCores      Reason = "max cluster cpu limit reached"
	ReasonMaxMemory     Reason = "max cluster memory limit reached"
	ReasonNotAll        Reason = "cannot host all pods of an all-or-nothing request"
)

// limitReason is the Reason a cluster-wide limit gives.
func limitReason(r resourcequotas.Resource) Reason {
	switch r {
	case resourcequotas.Nodes:
		return ReasonMaxNodesTotal
	case resourcequotas.CPU:
		return ReasonMaxCores
	case resourcequotas.Memory:
		return ReasonMaxMemory
	}
	return ""
}

// Plan is what a scale-up decided, before anything is asked of the cloud:
// the options that would help, with the increases each would make, and
// for the pods no option helps, the reasons. Making it changes nothing and
// records nothing; the executor acts on it.
type Plan struct {
	// Options are the expander's candidates.
	Options []expander.Option
	// Increases per option's group: the option's group alone, or with
	// --balance-similar-node-groups spread over it and its similar groups.
	Increases map[string][]Increase
	// NotHelped are the pods no option helps, by equivalence group, with
	// the reasons their node groups gave.
	NotHelped []NotHelped
	// CappedByMaxNodes are the groups whose growth --max-nodes-total, not
	// their own limits, bounds.
	CappedByMaxNodes map[string]bool
	// LimitsHit are the cluster-wide limits that left some group no room,
	// each once.
	LimitsHit []resourcequotas.Resource
	// EstimateTimes are how long each option's estimate took.
	EstimateTimes []time.Duration
	// AllOrNothing: every option places all pods, and its group grows with
	// the provider's AtomicIncreaseSize (Input.AllOrNothing).
	AllOrNothing bool
}

// NotHelped are pods of one equivalence group that no option helps.
type NotHelped struct {
	Pods []*apiv1.Pod
	// Reasons counts, per reason, the node groups that gave it.
	Reasons map[Reason]int
}

// Increase is one group's size change.
type Increase struct {
	GroupID  string
	From, To int
	Max      int
}

func (i Increase) String() string {
	return fmt.Sprintf("{%s %d->%d (max: %d)}", i.GroupID, i.From, i.To, i.Max)
}

// Balance spreads n new nodes over groups so their targets end up as even
// as their maxima allow: each node goes to the group with the smallest
// target that still has room (ties by id).
func Balance(groups []clusterstate.NodeGroupState, n int) []Increase {
	sorted := append([]clusterstate.NodeGroupState(nil), groups...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Group.Id() < sorted[j].Group.Id() })
	to := make([]int, len(sorted))
	for i, gs := range sorted {
		to[i] = gs.Target
	}
	for ; n > 0; n-- {
		pick := -1
		for i, gs := range sorted {
			if to[i] >= gs.Group.MaxSize() {
				continue
			}
			if pick < 0 || to[i] < to[pick] {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		to[pick]++
	}
	var out []Increase
	for i, gs := range sorted {
		if to[i] > gs.Target {
			out = append(out, Increase{GroupID: gs.Group.Id(), From: gs.Target, To: to[i], Max: gs.Group.MaxSize()})
		}
	}
	return out
}

// ReasonSummary renders "2 max node group size reached, 1 Insufficient cpu".
func ReasonSummary(reasons map[Reason]int) string {
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", reasons[Reason(k)], k)
	}
	if len(parts) == 0 {
		return "no node groups"
	}
	return strings.Join(parts, ", ")
}
