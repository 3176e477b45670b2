package scaledown

import (
	"fmt"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/budgets"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

// GroupFacts is what choose needs to know of a node group.
type GroupFacts struct {
	MinSize int
	// Target is the group's target: the lower of the registry's, read at
	// the start of the loop, and the provider's now (a removal may have
	// finished since).
	Target int
	// Deleting counts its nodes being removed, read before Target: a
	// removal finishing in between is counted twice (a node kept), never
	// missed.
	Deleting     int
	UnneededTime time.Duration
	UnreadyTime  time.Duration
}

// Plan is what choose decided: the removals to start, and for each
// unneeded node kept, why. Making it changes nothing and records nothing.
type Plan struct {
	Empty, Drain []*UnneededNode
	Kept         []Kept
	// NextAt is when the next unneeded node reaches its unneeded (or
	// unready) time; zero when none waits for that.
	NextAt time.Time
}

// Kept is an unneeded node whose removal does not start now.
type Kept struct {
	Node *UnneededNode
	// Reason goes to unremovable_nodes_count; NoReason for a node that
	// waits only for a removal budget (upstream does not count those).
	Reason simulator.UnremovableReason
	// Minimum is the cluster-wide minimum its removal would break, if that
	// is the reason.
	Minimum resourcequotas.Resource
	// Why explains it, for the log.
	Why string
}

// choose picks, in unneeded's order (empty nodes first), the nodes whose
// removal starts now: unneeded long enough, within the removal budgets,
// keeping every group above its min size and the cluster above its
// --cores-total / --memory-total minimums.
func choose(unneeded []*UnneededNode, groups map[string]GroupFacts, b budgets.Budgets, quotas resourcequotas.Tracker, now time.Time) Plan {
	var p Plan
	picked := map[string]int{}
	for _, u := range unneeded {
		g, ok := groups[u.GroupID]
		if !ok {
			continue
		}
		threshold, reason := g.UnneededTime, simulator.NotUnneededLongEnough
		if u.Unready {
			threshold, reason = g.UnreadyTime, simulator.NotUnreadyLongEnough
		}
		if d := now.Sub(u.Since); d < threshold {
			if at := u.Since.Add(threshold); p.NextAt.IsZero() || at.Before(p.NextAt) {
				p.NextAt = at
			}
			p.Kept = append(p.Kept, Kept{Node: u, Reason: reason,
				Why: fmt.Sprintf("unneeded for %s of %s", d.Round(time.Second), threshold)})
			continue
		}
		if flag := b.Wait(!u.Empty, len(p.Empty)+len(p.Drain), len(p.Drain)); flag != "" {
			p.Kept = append(p.Kept, Kept{Node: u, Why: budgetWhy(flag, b, len(p.Empty)+len(p.Drain), len(p.Drain))})
			continue
		}
		if size := g.Target - g.Deleting - picked[u.GroupID]; size <= g.MinSize {
			p.Kept = append(p.Kept, Kept{Node: u, Reason: simulator.NodeGroupMinSizeReached,
				Why: fmt.Sprintf("node group %s would go below its min size %d", u.GroupID, g.MinSize)})
			continue
		}
		if short := quotas.CheckRemoval(u.Node); short != "" {
			p.Kept = append(p.Kept, Kept{Node: u, Reason: simulator.MinimalResourceLimitExceeded, Minimum: short,
				Why: fmt.Sprintf("the cluster would go below its minimum %s", short)})
			continue
		}
		quotas.Remove(u.Node)
		picked[u.GroupID]++
		if u.Empty {
			p.Empty = append(p.Empty, u)
		} else {
			p.Drain = append(p.Drain, u)
		}
	}
	return p
}

// budgetWhy says which removal budget a node waits for.
func budgetWhy(flag string, b budgets.Budgets, picked, drains int) string {
	if flag == budgets.WaitDrainParallelism {
		return fmt.Sprintf("%d node(s) already being drained (--max-drain-parallelism=%d)", b.MaxDrains-b.Drains+drains, b.MaxDrains)
	}
	return fmt.Sprintf("%d node(s) already being removed (--max-scale-down-parallelism=%d)", b.MaxTotal-b.Total+picked, b.MaxTotal)
}
