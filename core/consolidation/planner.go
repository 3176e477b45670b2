package consolidation

import (
	"fmt"
	"math"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// maxMultiNode bounds the nodes one multi-node command removes: each try
// simulates every node of the set, and the search tries a few sets per
// replacement size.
const maxMultiNode = 10

// maxSingleNode bounds the candidates single-node consolidation tries in
// one loop (each try is a removal simulation per replacement size).
const maxSingleNode = 20

// Input is what Plan decides from.
type Input struct {
	// Snapshot holds the registered nodes not being removed with their
	// pods (and the pods the iteration placed: pending pods that fit,
	// bookings). Plan forks it and leaves it as it found it.
	Snapshot *simulator.ClusterSnapshot
	Checker  *simulator.PredicateChecker
	// DrainOptions are scale-down's drain rules.
	DrainOptions drain.Options
	PDBs         []*policyv1.PodDisruptionBudget
	// Candidates in the order to try them (see Candidates).
	Candidates []Candidate
	// Replacements are the nodes a command may add.
	Replacements []Replacement
	// Removable is, per group, how many nodes may go before it reaches its
	// min size.
	Removable map[string]int
	// Threshold is the least saving, as a fraction of the removed nodes'
	// price (--consolidation-savings-threshold).
	Threshold float64
	// MaxNodes bounds the nodes one command removes (the disruption
	// budget left).
	MaxNodes int
	Now      time.Time
}

// Plan proposes one command, nil when none saves enough: first a
// multi-node command (the largest set of candidates, in order, whose pods
// fit on the other nodes, or on them and one cheaper new node), else a
// single-node one (a candidate whose pods fit on the others, or on one
// cheaper new node). Every command is validated by the removal simulation
// scale-down uses: the same drain rules, PDBs (one allowing no disruption
// blocks; see evictedInTurn), DRA claims and the room the snapshot's booked
// pods hold.
func Plan(in Input) *Command {
	if in.MaxNodes <= 0 || len(in.Candidates) == 0 {
		return nil
	}
	p := planner{in: in}
	c := p.multiNode()
	if step := p.towards(c); step != nil {
		return step
	}
	if c != nil {
		return c
	}
	return p.singleNode()
}

type planner struct {
	in Input
}

// multiNode tries every prefix of the candidates from two nodes up to
// the budget and returns the command that saves most. Unlike Karpenter's
// multi-node consolidation it does not binary-search the prefix length:
// the saving is not monotone in it (two nodes may fit one bigger node at
// their own price and save nothing, where three save a third), so a
// failed length says nothing of a longer one. The work is bounded by
// maxMultiNode lengths, each a delete and at most one simulation per
// replacement size.
func (p *planner) multiNode() *Command {
	hi := min(len(p.in.Candidates), p.in.MaxNodes, maxMultiNode)
	var best *Command
	for n := 2; n <= hi; n++ {
		if c := p.best(p.in.Candidates[:n]); c != nil && (best == nil || c.Saving > best.Saving) {
			best = c
		}
	}
	return best
}

// towards is the first step of a merge larger than the budget allows:
// when replacing more candidates than MaxNodes by one node saves more
// than within, the command that replaces the first MaxNodes of them by
// that node, if it saves enough on its own. The node is then bigger than
// those candidates need; the later commands delete the others onto its
// free room, so no pod moves twice (Candidates leaves out the nodes
// holding pods a command moved). within is the best command the budget allows, nil if
// none.
func (p *planner) towards(within *Command) *Command {
	budget := min(p.in.MaxNodes, maxMultiNode)
	if budget < 1 || len(p.in.Candidates) <= budget {
		return nil
	}
	var target *Command
	for n := budget + 1; n <= min(len(p.in.Candidates), maxMultiNode); n++ {
		if c := p.best(p.in.Candidates[:n]); c != nil && (target == nil || c.Saving > target.Saving) {
			target = c
		}
	}
	if target == nil || target.Kind != Replace || (within != nil && target.Saving <= within.Saving) {
		return nil
	}
	set := target.Remove[:budget]
	if step := p.replace(set, target.Replacement); step != nil {
		return step
	}
	return nil
}

// singleNode tries the candidates one by one.
func (p *planner) singleNode() *Command {
	for i, c := range p.in.Candidates {
		if i == maxSingleNode {
			break
		}
		if cmd := p.best([]Candidate{c}); cmd != nil {
			return cmd
		}
	}
	return nil
}

// best returns the command that removes set, deleting if the pods fit the
// other nodes, else replacing by the cheapest replacement that saves
// enough and holds them; nil when none.
func (p *planner) best(set []Candidate) *Command {
	if !p.withinMinSizes(set) {
		return nil
	}
	removed := 0.0
	for _, c := range set {
		removed += c.Price
	}
	if ok, _ := p.fits(set, nil); ok {
		return &Command{Kind: Delete, Remove: set, RemovedPrice: removed, Saving: removed}
	}
	for i := range p.in.Replacements {
		if c := p.replace(set, &p.in.Replacements[i]); c != nil {
			return c
		}
	}
	return nil
}

// replace returns the command that replaces set by one node of r, nil
// when it saves too little or set's pods do not fit.
func (p *planner) replace(set []Candidate, r *Replacement) *Command {
	if !p.withinMinSizes(set) {
		return nil
	}
	removed := 0.0
	for _, c := range set {
		removed += c.Price
	}
	saving := removed - r.Price
	if r.Room < 1 || saving <= p.in.Threshold*removed {
		return nil
	}
	if ok, _ := p.fits(set, r); !ok {
		return nil
	}
	return &Command{Kind: Replace, Remove: set, Replacement: r, Count: 1, RemovedPrice: removed, Saving: saving}
}

// withinMinSizes reports whether removing set leaves every group at or
// above its min size.
func (p *planner) withinMinSizes(set []Candidate) bool {
	per := map[string]int{}
	for _, c := range set {
		per[c.GroupID]++
		if per[c.GroupID] > p.in.Removable[c.GroupID] {
			return false
		}
	}
	return true
}

// fits simulates removing set, with a node of r added when r is not nil:
// every pod that must leave set's nodes has to be placed on the nodes
// that stay or on the new one. The snapshot is left unchanged.
func (p *planner) fits(set []Candidate, r *Replacement) (bool, string) {
	return Fits(p.in.Snapshot, p.in.Checker, p.in.DrainOptions, p.in.PDBs, set, r, p.in.Now)
}

// Fits is the simulation behind every command, also run by the executor
// again once the replacement is Ready: set's pods must all be placed on
// the nodes that stay (and on a node of r when r is not nil). It leaves
// the snapshot as it found it and says why not.
func Fits(snap *simulator.ClusterSnapshot, checker *simulator.PredicateChecker, opts drain.Options, pdbs []*policyv1.PodDisruptionBudget,
	set []Candidate, r *Replacement, now time.Time) (bool, string) {
	snap.Fork()
	defer snap.Revert()
	leaving := make(map[string]bool, len(set))
	for _, c := range set {
		leaving[c.Node.Name] = true
	}
	dest := map[string]bool{}
	for _, name := range snap.NodeNames() {
		if !leaving[name] {
			dest[name] = true
		}
	}
	if r != nil {
		n := scaleup.CloneTemplate(r.Template, "consolidation")
		if err := snap.AddNodeInfo(n); err != nil {
			return false, fmt.Sprintf("adding the replacement node: %v", err)
		}
		dest[n.Node().Name] = true
	}
	pdbs = evictedInTurn(pdbs)
	rs := simulator.NewRemovalSimulator(checker, snap, opts)
	for _, c := range set {
		if _, un := rs.SimulateNodeRemoval(c.Node.Name, dest, pdbs, now); un != nil {
			klog.V(4).InfoS("Consolidation: simulation refused", "node", klog.KObj(c.Node), "why", un.String())
			return false, un.String()
		}
	}
	return true, ""
}

// evictedInTurn returns pdbs with every budget that allows a disruption now
// made unbounded. The drain evicts through the Eviction API, which refuses
// what a budget does not allow, and retries a refusal until the evicted
// pods' replacements are Ready (--max-pod-eviction-time): two pods of a
// maxUnavailable 1 budget on the nodes of one command leave in turn. Only a
// budget allowing no disruption now blocks, as in Karpenter; counting each
// budget's allowance against all the command's pods at once would keep
// any node holding two pods of one Deployment forever.
func evictedInTurn(pdbs []*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	out := make([]*policyv1.PodDisruptionBudget, len(pdbs))
	for i, pdb := range pdbs {
		out[i] = pdb
		if pdb.Status.DisruptionsAllowed > 0 {
			c := pdb.DeepCopy()
			c.Status.DisruptionsAllowed = math.MaxInt32
			out[i] = c
		}
	}
	return out
}
