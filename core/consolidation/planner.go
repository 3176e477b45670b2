package consolidation

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// maxMultiNode bounds the nodes one multi-node command removes: each try
// simulates every node of the set, and the search tries a few sets per
// replacement size.
const maxMultiNode = 10

// maxSingleNode bounds the candidates single-node consolidation tries in
// one loop (each try is a removal simulation per replacement size).
const maxSingleNode = 20

// maxCandidates is how many candidates, the first in order, the planner
// reads: the single-node and multi-node searches go no further.
const maxCandidates = max(maxSingleNode, maxMultiNode)

// simulationBudget bounds the planner's work in one loop, in node removals
// simulated (a command's simulation removes each of its nodes in turn).
// Without it the work grows with the replacement sizes: multi-node
// lengths, single nodes and the merge beyond the budget, each tried as a
// delete and then once per replacement, reach about 1,000 removals with
// ten sizes. Past the budget the commands left are not weighed in this
// loop (Decision.Skipped, the consolidation_simulations_total metric);
// the search order puts the cheapest, likeliest commands first.
const simulationBudget = 300

// Input is what Plan decides from.
type Input struct {
	// Snapshot holds the registered nodes not being removed with their
	// pods (and the pods the iteration placed: pending pods that fit,
	// bookings), without the nodes the loop's other phases removed. Plan
	// forks it and leaves it as it found it.
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
	// Quotas counts the cluster against its limits (--max-nodes-total,
	// --cores-total, --memory-total), nodes whose removal the loop's
	// earlier phases started included (it may fail); nil: no limits. A
	// replacement is added before the nodes it replaces go, so it must
	// fit under the maxima with them.
	Quotas *resourcequotas.Tracker
	// Minima is Quotas with those removals counted done (nil: Quotas):
	// what a command removes must leave the cluster at or above the
	// minimums.
	Minima *resourcequotas.Tracker
	// Threshold is the least saving, as a fraction of the removed nodes'
	// price (--consolidation-savings-threshold).
	Threshold float64
	// Cost weighs each command's saving against its disruption.
	Cost CostModel
	// BackedOff tells a command (by Key) not to be tried again yet: one
	// aborted recently (nil: none).
	BackedOff func(key string) bool
	// MaxNodes bounds the nodes one command removes (the disruption
	// budget left).
	MaxNodes int
	// Held is the key of the command held for its window (Stabilizer),
	// "" for none: while it still pays it is chosen again over a better
	// one, unless that one is worth more than twice as much. On a moving load another command comes out a little ahead
	// every few loops (a scale-in deletes the pods of one node, a pod lands
	// on another); choosing it restarts the window, and on the compressed
	// day commands were planned for one node after another through the
	// evening and carried out only in the night that followed.
	Held string
	Now  time.Time
}

// Decision is what Plan chose, and the commands it refused because they
// would not pay for their disruption.
type Decision struct {
	Command      *Command
	Unprofitable []Command
	// Simulated counts the node removals simulated; Skipped the commands
	// left unweighed once they reached simulationBudget.
	Simulated, Skipped int
}

// Plan proposes one command, nil when none saves enough and pays for its
// disruption.
func Plan(in Input) *Command { return Decide(in).Command }

// Decide gathers every kind of command (see below), each validated by the
// removal simulation scale-down uses (the same drain rules, PDBs with
// evictedInTurn, DRA claims and the room the snapshot's booked pods hold)
// and within the limits, and chooses by one measure, the appraisal's
// value (saving over the horizon less the disruption's cost), whatever
// their kind:
//   - multi-node: each prefix of the candidates from two nodes up to the
//     budget, deleted or replaced by one cheaper node;
//   - single-node: each candidate alone;
//   - beyond the budget: the first budget's worth of nodes of a larger
//     merge, onto the node that would hold them all (see towards).
//
// A command whose appraisal does not pay is refused and listed.
func Decide(in Input) Decision {
	var d Decision
	if in.MaxNodes <= 0 || len(in.Candidates) == 0 {
		return d
	}
	p := planner{in: in, budget: simulationBudget}
	var options []*Command
	options = append(options, p.multiNode()...)
	options = append(options, p.singleNode()...)
	options = append(options, p.towards())
	d.Simulated, d.Skipped = p.simulated, p.skipped
	if p.skipped > 0 {
		klog.V(2).InfoS("Consolidation: the planner's work budget ran out; some commands were not weighed this loop",
			"simulatedRemovals", p.simulated, "budget", p.budget, "skippedCommands", p.skipped)
	}
	var held *Command
	for _, c := range options {
		if c == nil {
			continue
		}
		c.Appraisal = in.Cost.Appraise(c)
		if !c.Appraisal.Pays() {
			d.Unprofitable = append(d.Unprofitable, *c)
			continue
		}
		if d.Command == nil || better(c, d.Command) {
			d.Command = c
		}
		if in.Held != "" && c.Key() == in.Held {
			held = c
		}
	}
	if held != nil && held.Appraisal.Value*heldAgainst >= d.Command.Appraisal.Value {
		d.Command = held
	}
	return d
}

// heldAgainst: the command held yields only to one worth more than this
// many times as much (a command backed off becomes available again, the
// cluster changed a lot), not to one a little better.
const heldAgainst = 2

// better orders commands by value, then by fewer evictions, then by key
// (so that the same cluster gives the same command loop after loop, which
// the stabilization window needs).
func better(a, b *Command) bool {
	if a.Appraisal.Value != b.Appraisal.Value {
		return a.Appraisal.Value > b.Appraisal.Value
	}
	if a.Appraisal.Evictions != b.Appraisal.Evictions {
		return a.Appraisal.Evictions < b.Appraisal.Evictions
	}
	return a.Key() < b.Key()
}

type planner struct {
	in Input
	// budget bounds simulated, the node removals simulated so far;
	// skipped counts the commands not simulated once it was reached.
	budget, simulated, skipped int
}

// multiNode returns, for every prefix of the candidates from two nodes up
// to the budget, the command that removes it. Unlike Karpenter's
// multi-node consolidation it does not binary-search the prefix length:
// the saving is not monotone in it (two nodes may fit one bigger node at
// their own price and save nothing, where three save a third), so a
// failed length says nothing of a longer one. The work is bounded by
// maxMultiNode lengths, each a delete and at most one simulation per
// replacement size.
func (p *planner) multiNode() []*Command {
	hi := min(len(p.in.Candidates), p.in.MaxNodes, maxMultiNode)
	var out []*Command
	for n := 2; n <= hi; n++ {
		out = append(out, p.best(p.in.Candidates[:n]))
	}
	return out
}

// towards is the first step of a merge larger than the budget allows:
// when replacing more candidates than MaxNodes by one node is possible,
// the command that replaces the first MaxNodes of them by that node, if it
// saves enough on its own. The node is then bigger than those candidates
// need; later commands may delete the others onto its free room. It is
// weighed by its own saving like every other command, never by the
// saving of the merge it starts: a merge the budget does not allow may
// never be finished (the load moves, a later command is refused), and a
// cluster left half-way must not be dearer than the best command within
// the budget would have left it.
func (p *planner) towards() *Command {
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
	if target == nil || target.Kind != Replace {
		return nil
	}
	return p.replace(target.Remove[:budget], target.Replacement)
}

// singleNode returns the command that removes each candidate alone (the
// first maxSingleNode of them).
func (p *planner) singleNode() []*Command {
	var out []*Command
	for i, c := range p.in.Candidates {
		if i == maxSingleNode {
			break
		}
		out = append(out, p.best([]Candidate{c}))
	}
	return out
}

// best returns the command that removes set, deleting if the pods fit the
// other nodes, else replacing by the cheapest replacement that saves
// enough, fits the limits and holds them; nil when none.
func (p *planner) best(set []Candidate) *Command {
	if !p.withinMinSizes(set) || p.belowMinimums(set) != "" {
		return nil
	}
	if c := p.delete(set); c != nil {
		return c
	}
	for i := range p.in.Replacements {
		if c := p.replaceBy(set, &p.in.Replacements[i]); c != nil {
			return c
		}
	}
	return nil
}

// delete returns the command that deletes set, nil when it is backed off
// or set's pods do not fit the other nodes.
func (p *planner) delete(set []Candidate) *Command {
	removed := 0.0
	for _, c := range set {
		removed += c.Price
	}
	cmd := &Command{Kind: Delete, Remove: set, RemovedPrice: removed, Saving: removed}
	if p.backedOff(cmd) {
		return nil
	}
	if ok, _ := p.fits(set, nil); !ok {
		return nil
	}
	return cmd
}

// replace returns the command that replaces set by one node of r, nil
// when it saves too little, goes past a limit or set's pods do not fit.
func (p *planner) replace(set []Candidate, r *Replacement) *Command {
	if !p.withinMinSizes(set) || p.belowMinimums(set) != "" {
		return nil
	}
	return p.replaceBy(set, r)
}

// replaceBy is replace for a set already within the min sizes and
// minimums (best checks them once for every replacement).
func (p *planner) replaceBy(set []Candidate, r *Replacement) *Command {
	removed := 0.0
	for _, c := range set {
		removed += c.Price
	}
	saving := removed - r.Price
	if r.Room < 1 || saving <= p.in.Threshold*removed || !p.fitsMaxima(r) || !keepsTaints(set, r) {
		return nil
	}
	cmd := &Command{Kind: Replace, Remove: set, Replacement: r, Count: 1, RemovedPrice: removed, Saving: saving}
	if p.backedOff(cmd) {
		return nil
	}
	if ok, _ := p.fits(set, r); !ok {
		return nil
	}
	return cmd
}

// keepsTaints reports whether r's nodes carry every scheduling taint of
// set's nodes: a pool tainted to keep other pods away (dedicated nodes)
// is never replaced by a node without the taint, which would let any pod
// in. The labels pods need are the simulation's to check: a pod whose
// selector or affinity the replacement does not match does not fit it.
func keepsTaints(set []Candidate, r *Replacement) bool {
	have := r.Template.Node().Spec.Taints
	for _, c := range set {
		for _, t := range c.Node.Spec.Taints {
			if t.Effect == apiv1.TaintEffectPreferNoSchedule || transientTaint(t.Key) {
				continue
			}
			if !slices.ContainsFunc(have, func(h apiv1.Taint) bool { return h.MatchTaint(&t) && h.Value == t.Value }) {
				return false
			}
		}
	}
	return true
}

// transientTaint tells a taint the node's state sets (Kubernetes' node
// lifecycle, the cloud provider's initialisation, this autoscaler's own),
// not the pool's configuration.
func transientTaint(key string) bool {
	return strings.HasPrefix(key, "node.kubernetes.io/") || strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/") ||
		key == clusterstate.ToBeDeletedTaint || key == clusterstate.DeletionCandidateTaint
}

func (p *planner) backedOff(c *Command) bool {
	return p.in.BackedOff != nil && p.in.BackedOff(c.Key())
}

// fitsMaxima reports whether one node of r fits under the cluster-wide
// maxima beside the nodes it replaces (make before break).
func (p *planner) fitsMaxima(r *Replacement) bool {
	if p.in.Quotas == nil {
		return true
	}
	q := *p.in.Quotas
	room, _ := q.Room(r.Template.Node(), 1)
	return room >= 1
}

// belowMinimums names the cluster-wide minimum (cpu, memory) that
// removing set would break, "" when none. A replacement adds back at
// most what it removes, so deletes are checked without it, the safe side.
func (p *planner) belowMinimums(set []Candidate) resourcequotas.Resource {
	floor := p.in.Minima
	if floor == nil {
		floor = p.in.Quotas
	}
	if floor == nil || !floor.HasMinima() {
		return ""
	}
	q := *floor
	for _, c := range set {
		if r := q.CheckRemoval(c.Node); r != "" {
			return r
		}
		q.Remove(c.Node)
	}
	return ""
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
	if p.budget > 0 && p.simulated+len(set) > p.budget {
		p.skipped++
		return false, "the planner's work budget for this loop is spent"
	}
	p.simulated += len(set)
	return Fits(p.in.Snapshot, p.in.Checker, p.in.DrainOptions, p.in.PDBs, set, r, p.in.Now)
}

// Fits is the simulation behind every command, also run by the executor
// again once the replacement is Ready: set's pods must all be placed on
// the nodes that stay (and on a node of r when r is not nil). It leaves
// the snapshot as it found it and says why not.
func Fits(snap *simulator.ClusterSnapshot, checker *simulator.PredicateChecker, opts drain.Options, pdbs []*policyv1.PodDisruptionBudget,
	set []Candidate, r *Replacement, now time.Time) (bool, string) {
	leaving := make(map[string]bool, len(set))
	for _, c := range set {
		leaving[c.Node.Name] = true
	}
	// More pods to move than the nodes that stay (and the replacement)
	// have room for, by their free resources alone, is refused without a
	// simulation: on a full cluster each pod would try every node first.
	// The bound is taken before the replacement joins the snapshot, whose
	// sum over every node then serves every command of the loop.
	var moving []*apiv1.Pod
	for _, c := range set {
		info, err := snap.GetNodeInfo(c.Node.Name)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range info.Pods() {
			if !drain.Skipped(p, now) {
				moving = append(moving, p)
			}
		}
	}
	var extra []*framework.NodeInfo
	if r != nil {
		extra = append(extra, r.Template)
	}
	if room := snap.PlacementBound(moving, leaving, extra...); room < len(moving) {
		return false, fmt.Sprintf("the nodes that stay have room for at most %d of the %d pods to move", room, len(moving))
	}
	snap.Fork()
	defer snap.Revert()
	if r != nil {
		n := scaleup.CloneTemplate(r.Template, "consolidation")
		if err := snap.AddNodeInfo(n); err != nil {
			return false, fmt.Sprintf("adding the replacement node: %v", err)
		}
	}
	pdbs = evictedInTurn(pdbs)
	rs := simulator.NewRemovalSimulator(checker, snap, opts)
	rs.Exclude(leaving)
	for _, c := range set {
		if _, un := rs.SimulateNodeRemoval(c.Node.Name, nil, pdbs, now); un != nil {
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
