package resourcequotas

import (
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// Totals are what a set of nodes adds up to.
type Totals struct {
	Nodes    int
	MilliCPU int64
	Memory   int64
	// HourlyCost is what the nodes of autoscaled groups among them cost
	// an hour (USD); Unpriced counts those with no price. Both stay zero
	// when the limits have no Money.
	HourlyCost float64
	Unpriced   int
}

// Of returns the totals of n nodes like node.
func Of(node *apiv1.Node, n int) Totals {
	return Totals{
		Nodes:    n,
		MilliCPU: node.Status.Capacity.Cpu().MilliValue() * int64(n),
		Memory:   node.Status.Capacity.Memory().Value() * int64(n),
	}
}

func (t Totals) plus(o Totals) Totals {
	return Totals{Nodes: t.Nodes + o.Nodes, MilliCPU: t.MilliCPU + o.MilliCPU, Memory: t.Memory + o.Memory,
		HourlyCost: t.HourlyCost + o.HourlyCost, Unpriced: t.Unpriced + o.Unpriced}
}

func (t Totals) minus(o Totals) Totals {
	return Totals{Nodes: t.Nodes - o.Nodes, MilliCPU: t.MilliCPU - o.MilliCPU, Memory: t.Memory - o.Memory,
		HourlyCost: t.HourlyCost - o.HourlyCost, Unpriced: t.Unpriced - o.Unpriced}
}

// of is Of with the nodes' hourly cost, counted for a template (groupNode)
// or for a node of an autoscaled group.
func (t *Tracker) of(node *apiv1.Node, n int, groupNode bool) Totals {
	tot := Of(node, n)
	if m := t.limits.Money; m != nil && (groupNode || (m.autoscaled != nil && m.autoscaled(node))) {
		m.costOf(node, n, &tot)
	}
	return tot
}

// IsLive tells a node that counts toward the cluster's totals: one not
// being removed, whether the actuator tracks its removal (beingDeleted) or
// it carries the ToBeDeletedByClusterAutoscaler taint (a removal by another
// instance, or one that outlived a restart). Its capacity is going away.
func IsLive(n *apiv1.Node, beingDeleted map[string]bool) bool {
	return !beingDeleted[n.Name] && !clusterstate.HasToBeDeletedTaint(n)
}

// LiveNodes returns the nodes IsLive keeps.
func LiveNodes(nodes []*apiv1.Node, beingDeleted map[string]bool) []*apiv1.Node {
	live := make([]*apiv1.Node, 0, len(nodes))
	for _, n := range nodes {
		if IsLive(n, beingDeleted) {
			live = append(live, n)
		}
	}
	return live
}

// Tracker holds one iteration's usage against the limits. It is a value:
// each decision takes its own copy, counts what it plans (Add, Remove) and
// leaves the others' untouched.
type Tracker struct {
	limits Limits
	// live: the registered live nodes; used: live plus what was added
	// (nodes coming up, increases planned) minus removals planned.
	live, used Totals
	// planned counts the nodes plans added (Add), not those coming up:
	// the instance quota's count already holds those.
	planned int
}

// NewTracker counts the live nodes among nodes.
func NewTracker(limits Limits, nodes []*apiv1.Node, beingDeleted map[string]bool) Tracker {
	t := Tracker{limits: limits}
	for _, n := range nodes {
		if IsLive(n, beingDeleted) {
			t.live = t.live.plus(t.of(n, 1, false))
		}
	}
	t.used = t.live
	return t
}

// WithLeaving returns a copy that also counts, against the maxima, the nodes
// being removed (not live) that the cloud still counts in their group's
// target (inTarget): until the cloud has taken a deletion, it may fail and
// the node stays, so buying in its place could end above a maximum. The
// minima keep counting such nodes gone.
func (t Tracker) WithLeaving(nodes []*apiv1.Node, beingDeleted map[string]bool, inTarget func(*apiv1.Node) bool) Tracker {
	for _, n := range nodes {
		if !IsLive(n, beingDeleted) && inTarget(n) {
			t.used = t.used.plus(t.of(n, 1, false))
		}
	}
	return t
}

// Limits returns the limits the tracker checks.
func (t *Tracker) Limits() Limits { return t.limits }

// Live returns the totals of the live registered nodes.
func (t *Tracker) Live() Totals { return t.live }

// Used returns the totals counted so far.
func (t *Tracker) Used() Totals { return t.used }

// Add counts n more nodes like node (nodes coming up, or an increase
// planned).
// node is a template of an autoscaled group: its cost counts.
func (t *Tracker) Add(node *apiv1.Node, n int) {
	t.used = t.used.plus(t.of(node, n, true))
	t.planned += n
}

// addUpcoming counts n nodes asked for and not registered yet: they exist
// as instances, so the instance quota's count holds them already.
func (t *Tracker) addUpcoming(node *apiv1.Node, n int) { t.used = t.used.plus(t.of(node, n, true)) }

// AddNodes counts n more nodes whose capacity is unknown (no template): they
// count toward --max-nodes-total, and, with money limits, as unpriced (their
// cost unknown, --max-hourly-cost cannot be shown to hold).
func (t *Tracker) AddNodes(n int) {
	t.used.Nodes += n
	if t.limits.Money != nil {
		t.used.Unpriced += n
	}
}

// Remove counts a node as gone (a removal planned).
func (t *Tracker) Remove(node *apiv1.Node) { t.used = t.used.minus(t.of(node, 1, false)) }

// Room returns how many of want nodes like node fit under the maxima and,
// when none does, the first resource (nodes, then the account's instance
// quota, then cpu, then memory, then hourly cost) that stops them. Fewer than want may fit with no resource named: the caller
// asked for more than a bound allows but some room is left.
func (t *Tracker) Room(node *apiv1.Node, want int) (int, Resource) {
	room := want
	if t.limits.MaxNodes > 0 {
		if left := t.limits.MaxNodes - t.used.Nodes; left < room {
			if room = left; room <= 0 {
				return 0, Nodes
			}
		}
	}
	if q := t.limits.Instances; q != nil {
		if left := q.Headroom - t.planned; left < room {
			if room = left; room <= 0 {
				return 0, Quota
			}
		}
	}
	per := Of(node, 1)
	if t.limits.MaxMilliCPU > 0 && per.MilliCPU > 0 {
		if left := int((t.limits.MaxMilliCPU - t.used.MilliCPU) / per.MilliCPU); left < room {
			if room = left; room <= 0 {
				return 0, CPU
			}
		}
	}
	if t.limits.MaxMemory > 0 && per.Memory > 0 {
		if left := int((t.limits.MaxMemory - t.used.Memory) / per.Memory); left < room {
			if room = left; room <= 0 {
				return 0, Memory
			}
		}
	}
	left, ok := t.costRoom(node, room)
	if !ok {
		return 0, Cost
	}
	room = left
	return room, ""
}

// BoundByMaxNodes reports whether --max-nodes-total, rather than anything
// else, is what stops a group: its room is all the cluster has left under
// the node limit and the estimate takes all of it (no room at all counts as
// taken: pass estimate 0). The MaxNodesTotalReached event tells users the
// flag, not the group, keeps pods pending.
func (t *Tracker) BoundByMaxNodes(room, estimate int) bool {
	return t.limits.MaxNodes > 0 && room >= t.limits.MaxNodes-t.used.Nodes && estimate >= room
}

// CheckRemoval returns the minimum (cpu, then memory) that removing node
// would break, or "" when the cluster stays at or above both.
// HasMinima tells whether a minimum bounds removals (--cores-total or
// --memory-total with a minimum above 0): without one, CheckRemoval never
// names a resource.
func (t *Tracker) HasMinima() bool { return t.limits.MinMilliCPU > 0 || t.limits.MinMemory > 0 }

func (t *Tracker) CheckRemoval(node *apiv1.Node) Resource {
	after := t.used.minus(Of(node, 1)) // minima bound cpu and memory only
	switch {
	case after.MilliCPU < t.limits.MinMilliCPU:
		return CPU
	case after.Memory < t.limits.MinMemory:
		return Memory
	}
	return ""
}

// WithUpcoming returns a copy that also counts the groups' nodes asked for
// and not registered yet, each like its group's template (node count only
// for a group without one).
func (t Tracker) WithUpcoming(groups []clusterstate.NodeGroupState, template func(groupID string) *apiv1.Node) Tracker {
	for _, gs := range groups {
		if gs.UpcomingUnregistered == 0 {
			continue
		}
		if n := template(gs.Group.Id()); n != nil {
			t.addUpcoming(n, gs.UpcomingUnregistered)
		} else {
			t.AddNodes(gs.UpcomingUnregistered)
		}
	}
	return t
}
