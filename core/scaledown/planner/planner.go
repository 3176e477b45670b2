// Package planner finds the nodes the cluster no longer needs: it filters
// candidates cheaply (group, annotations, readiness, utilization, drain
// rules), runs a removal simulation for each survivor on top of the ones
// found before it, and tracks how long each node has been unneeded and why
// every other node stays.
package planner

import (
	"fmt"
	"math"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// Planner decides which nodes are unneeded.
type Planner struct {
	opts     config.AutoscalingOptions
	provider cloudprovider.CloudProvider
	registry *clusterstate.Registry
	checker  *simulator.PredicateChecker

	// drainOpts are the drain rules (safe-to-evict, local storage, system
	// pods, controllers, --min-replica-count).
	drainOpts drain.Options

	unneeded    map[string]*scaledown.UnneededNode
	unremovable *unremovableNodes
	requests    *utilization.RequestsCache
	memo        simulationMemo
	// simulated counts loops that ran the removal simulations; reused,
	// nodes whose previous simulation such a loop reused.
	simulated, reused int
}

// New returns a planner that judges pods by drainOpts.
func New(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, registry *clusterstate.Registry,
	checker *simulator.PredicateChecker, drainOpts drain.Options) *Planner {
	return &Planner{opts: opts, provider: provider, registry: registry, checker: checker, drainOpts: drainOpts,
		unneeded: map[string]*scaledown.UnneededNode{}, unremovable: newUnremovableNodes(), requests: utilization.NewRequestsCache()}
}

type candidate struct {
	node    *apiv1.Node
	groupID string
	unready bool
	empty   bool
	util    utilization.Info
	// toMove are the pods the drain rules would move.
	toMove []*apiv1.Pod
}

// Update recomputes the unneeded nodes: candidates are filtered by group
// size, annotations, readiness and utilization, then each must pass a
// removal simulation (every pod movable and fitting on another node, given
// the nodes already found unneeded). It returns what it found, per node
// group, for the reporter to record (registry and metrics); the planner
// itself writes neither.
func (p *Planner) Update(in scaledown.PlannerInput) (found scaledown.Candidates, err error) {
	start := time.Now()
	defer func() { found.Took = time.Since(start) }()
	// One answer per controller for the whole pass (see replicasMemo).
	drainOpts := p.drainOpts
	p.drainOpts.ControllerReplicas = replicasMemo(drainOpts.ControllerReplicas)
	defer func() { p.drainOpts = drainOpts }()

	p.unremovable.begin()
	cands := p.candidates(in)
	p.requests.Sweep()
	p.sortCandidates(cands)
	next, err := p.simulate(cands, in)
	if err != nil {
		return found, err
	}
	for name := range p.unneeded {
		if next[name] == nil {
			klog.V(2).InfoS("Scale-down: node is needed again", "node", klog.KRef("", name))
		}
	}
	p.unneeded = next
	byGroup := map[string]int{}
	for _, c := range next {
		byGroup[c.GroupID]++
	}
	return scaledown.Candidates{ByGroup: byGroup, Unneeded: len(next)}, nil
}

// controllerKey names a pod's controller as drain's ControllerReplicas looks
// it up.
type controllerKey struct {
	namespace, kind, name string
	uid                   types.UID
}

type controllerReplicas struct {
	replicas int32
	found    bool
}

// replicasMemo wraps a ControllerReplicas lookup (nil stays nil) so that a
// pass asks it once per controller: the drain rules check every pod of every
// candidate, twice for a simulated node, and each lister lookup allocated
// (a namespace lister, the key, a NotFound error): about half of the
// allocations of a 1,000-node loop. Within one pass every node is judged by
// the same view of a controller.
func replicasMemo(f func(string, metav1.OwnerReference) (int32, bool)) func(string, metav1.OwnerReference) (int32, bool) {
	if f == nil {
		return nil
	}
	seen := map[controllerKey]controllerReplicas{}
	return func(ns string, ref metav1.OwnerReference) (int32, bool) {
		k := controllerKey{namespace: ns, kind: ref.Kind, name: ref.Name, uid: ref.UID}
		if r, ok := seen[k]; ok {
			return r.replicas, r.found
		}
		replicas, found := f(ns, ref)
		seen[k] = controllerReplicas{replicas: replicas, found: found}
		return replicas, found
	}
}

// sortCandidates orders the simulations: empty nodes first (they add no load
// elsewhere), then nodes already unneeded (so the non-empty limit does not
// reset their timers), the longest unneeded first (a node found this loop
// never takes the room a node waiting longer moves its pods to), then the
// least utilized. A loop thus simulates the previous loop's unneeded nodes
// in the previous loop's order, which lets it reuse their simulations
// (simulationMemo).
//
// Each candidate's previous unneeded entry is looked up once, not in every
// comparison (two map lookups per comparison were 5 % of a 1,000-node loop).
func (p *Planner) sortCandidates(cands []candidate) {
	s := candidateSort{cands: cands, since: make([]*scaledown.UnneededNode, len(cands))}
	for i, c := range cands {
		s.since[i] = p.unneeded[c.node.Name]
	}
	sort.Stable(s)
}

// candidateSort sorts candidates with their previous unneeded entries (nil:
// not unneeded before) beside them.
type candidateSort struct {
	cands []candidate
	since []*scaledown.UnneededNode
}

func (s candidateSort) Len() int { return len(s.cands) }

func (s candidateSort) Swap(i, j int) {
	s.cands[i], s.cands[j] = s.cands[j], s.cands[i]
	s.since[i], s.since[j] = s.since[j], s.since[i]
}

func (s candidateSort) Less(i, j int) bool {
	a, b := &s.cands[i], &s.cands[j]
	if a.empty != b.empty {
		return a.empty
	}
	ua, ub := s.since[i], s.since[j]
	if (ua != nil) != (ub != nil) {
		return ua != nil
	}
	if ua != nil && !ua.Since.Equal(ub.Since) {
		return ua.Since.Before(ub.Since)
	}
	if a.util.Utilization != b.util.Utilization {
		return a.util.Utilization < b.util.Utilization
	}
	return a.node.Name < b.node.Name
}

// destinations are the nodes pods may move to: ready, schedulable, not
// being removed and not held by another phase.
func destinations(in scaledown.PlannerInput) map[string]bool {
	dest := map[string]bool{}
	for _, n := range in.Nodes {
		if in.BeingDeleted[n.Name] || in.Held[n.Name] != "" || clusterstate.HasToBeDeletedTaint(n) || n.Spec.Unschedulable {
			continue
		}
		if ready, _ := clusterstate.NodeReadiness(n); ready {
			dest[n.Name] = true
		}
	}
	return dest
}

// draDrivers is the node's dra_drivers metric label.
func draDrivers(snap *simulator.ClusterSnapshot, node string) string {
	if d := snap.DRA(); d != nil {
		return dra.DriversLabel(d.NodeSlices(node))
	}
	return ""
}

// simulate runs the removal simulation of each candidate in order, on top of
// the removals found before it, and returns the unneeded nodes. Each node
// found removable spends the PDB disruptions its evictions need, so the
// unneeded set as a whole stays within every budget.
func (p *Planner) simulate(cands []candidate, in scaledown.PlannerInput) (map[string]*scaledown.UnneededNode, error) {
	next := map[string]*scaledown.UnneededNode{}
	if len(cands) == 0 {
		return next, nil
	}
	snap, err := in.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("cluster snapshot: %w", err)
	}
	dest := destinations(in)
	pdbs := in.PDBs
	base := baseKey(snap.Version(), dest, pdbs)
	inputs := make([]uint64, len(cands))
	for i, c := range cands {
		inputs[i] = candidateKey(c)
	}
	key := p.simulationKey(base, cands, inputs)
	memoOK := snap.DRA() == nil || snap.DRA().Empty()
	if memoOK && p.memo.valid && p.memo.key == key {
		return p.replay(cands, in), nil
	}
	p.simulated++
	last := p.memo.records
	if !memoOK || !p.memo.valid {
		last = nil
	}
	p.memo = simulationMemo{key: key, records: make(map[string]memoRecord, len(last))}
	snap.Fork()
	defer snap.Revert()
	p.checker.TurnHints()
	rs := simulator.NewRemovalSimulator(p.checker, snap, p.drainOpts)
	budget := p.newCandidateBudget(len(in.Nodes))
	// chained names the removals committed so far (see memoRecord).
	chained := base
	for i, c := range cands {
		_, known := p.unneeded[c.node.Name]
		fresh := !c.empty && !known
		if fresh {
			if why := budget.exhausted(); why != "" {
				budget.skipped++
				p.note(c.node.Name, simulator.NotUnneededOtherReason, "not simulated this loop: "+why)
				continue
			}
			budget.examined++
		}
		wasDest := dest[c.node.Name]
		delete(dest, c.node.Name)
		rec := memoRecord{input: inputs[i], before: chained}
		if !p.reuse(rs, last[c.node.Name], &rec, dest, pdbs, in.Now) {
			removal, unremovable := rs.SimulateNodeRemoval(c.node.Name, dest, pdbs, in.Now)
			if unremovable != nil {
				rec.stays, rec.reason, rec.detail = true, unremovable.Reason, describeUnremovable(unremovable)
			}
			rec.removal = removal
		}
		p.memo.records[c.node.Name] = rec
		if rec.stays {
			if wasDest {
				dest[c.node.Name] = true
			}
			p.note(c.node.Name, rec.reason, rec.detail)
			continue
		}
		removal := rec.removal
		chained = chain(chained, removal)
		if fresh {
			budget.found++
		}
		pdbs = drain.SpendDisruptions(pdbs, removal.PodsToReschedule)
		since := in.Now
		if prev := p.unneeded[c.node.Name]; prev != nil {
			since = prev.Since
		} else {
			klog.V(2).InfoS("Scale-down: node is unneeded", "node", klog.KObj(c.node), "nodeGroup", c.groupID,
				"podsToMove", len(removal.PodsToReschedule))
		}
		u := &scaledown.UnneededNode{Node: c.node, GroupID: c.groupID, Since: since, Empty: len(removal.PodsToReschedule) == 0,
			Unready: c.unready, PodsToEvict: removal.PodsToReschedule, Utilization: c.util, DRADrivers: draDrivers(snap, c.node.Name)}
		next[c.node.Name] = u
		p.memo.results = append(p.memo.results, memoResult{name: c.node.Name, empty: u.Empty, podsToEvict: u.PodsToEvict, draDrivers: u.DRADrivers})
	}
	if budget.skipped > 0 {
		p.memo.skipped, p.memo.found, p.memo.why = budget.skipped, budget.found, budget.exhausted()
		p.logSkipped()
	}
	p.memo.valid = memoOK && !budget.timedOut
	return next, nil
}

// reuse fills cur with the previous loop's outcome of the node's simulation
// when prev was simulated from the state this one is in (the same inputs
// and chain), replaying its removal on the snapshot. False: the node must
// be simulated. (A failure of the simulation itself is never reused.)
func (p *Planner) reuse(rs *simulator.RemovalSimulator, prev memoRecord, cur *memoRecord, dest map[string]bool,
	pdbs []*policyv1.PodDisruptionBudget, now time.Time) bool {
	if prev.input != cur.input || prev.before != cur.before || prev.removal == nil && !prev.stays ||
		prev.stays && prev.reason == simulator.UnexpectedError {
		return false
	}
	if prev.stays {
		cur.stays, cur.reason, cur.detail = true, prev.reason, prev.detail
	} else {
		r, ok := rs.ReplayNodeRemoval(prev.removal, dest, pdbs, now)
		if !ok {
			return false
		}
		cur.removal = r
	}
	p.reused++
	return true
}

// note records why a simulated node stays, for this loop and its replays.
func (p *Planner) note(node string, reason simulator.UnremovableReason, detail string) {
	p.unremovable.add(node, reason, detail)
	p.memo.notes = append(p.memo.notes, memoNote{node: node, reason: reason, detail: detail})
}

func (p *Planner) logSkipped() {
	klog.V(2).InfoS("Scale-down: non-empty nodes left for later loops", "nodes", p.memo.skipped, "why", p.memo.why, "newUnneeded", p.memo.found)
}

// replay gives the memo's outcome for this loop's candidates (the same
// nodes, in their current objects and utilization).
func (p *Planner) replay(cands []candidate, in scaledown.PlannerInput) map[string]*scaledown.UnneededNode {
	byName := make(map[string]*candidate, len(cands))
	for i := range cands {
		byName[cands[i].node.Name] = &cands[i]
	}
	for _, n := range p.memo.notes {
		p.unremovable.add(n.node, n.reason, n.detail)
	}
	next := make(map[string]*scaledown.UnneededNode, len(p.memo.results))
	for _, r := range p.memo.results {
		c := byName[r.name]
		since := in.Now
		if prev := p.unneeded[r.name]; prev != nil {
			since = prev.Since
		}
		next[r.name] = &scaledown.UnneededNode{Node: c.node, GroupID: c.groupID, Since: since, Empty: r.empty,
			Unready: c.unready, PodsToEvict: r.podsToEvict, Utilization: c.util, DRADrivers: r.draDrivers}
	}
	if p.memo.skipped > 0 {
		p.logSkipped()
	}
	return next
}

// candidateBudget bounds the simulation of non-empty nodes not yet unneeded
// in one loop, as upstream's candidate pool does: at most
// max(nodes × --scale-down-candidates-pool-ratio,
// --scale-down-candidates-pool-min-count) simulated, at most
// --scale-down-non-empty-candidates-count found (0 or less: no limit), and no
// new simulation after --scale-down-simulation-timeout. Empty nodes and nodes
// already unneeded are always checked, so every unneeded node stays tracked
// and more are added each loop until all are.
type candidateBudget struct {
	pool, maxFound int
	deadline       time.Time
	// timedOut: the deadline stopped a simulation.
	timedOut                 bool
	examined, found, skipped int
	poolRatio                float64
	poolMin, nonEmptyCount   int
	simulationTimeout        time.Duration
}

func (p *Planner) newCandidateBudget(nodes int) *candidateBudget {
	pool := int(math.Ceil(float64(nodes) * p.opts.ScaleDownCandidatesPoolRatio))
	pool = max(pool, p.opts.ScaleDownCandidatesPoolMinCount)
	b := &candidateBudget{pool: pool, maxFound: p.opts.ScaleDownNonEmptyCandidatesCount,
		poolRatio: p.opts.ScaleDownCandidatesPoolRatio, poolMin: p.opts.ScaleDownCandidatesPoolMinCount,
		nonEmptyCount: p.opts.ScaleDownNonEmptyCandidatesCount, simulationTimeout: p.opts.ScaleDownSimulationTimeout}
	if p.opts.ScaleDownSimulationTimeout > 0 {
		b.deadline = time.Now().Add(p.opts.ScaleDownSimulationTimeout)
	}
	return b
}

// exhausted says which bound stops new simulations ("" while none does).
func (b *candidateBudget) exhausted() string {
	switch {
	case b.maxFound > 0 && b.found >= b.maxFound:
		return fmt.Sprintf("%d new non-empty candidates found, --scale-down-non-empty-candidates-count=%d", b.found, b.nonEmptyCount)
	case b.examined >= b.pool:
		return fmt.Sprintf("candidate pool of %d simulated: --scale-down-candidates-pool-ratio=%g, --scale-down-candidates-pool-min-count=%d", b.pool, b.poolRatio, b.poolMin)
	case b.timedOut || !b.deadline.IsZero() && time.Now().After(b.deadline):
		b.timedOut = true
		return fmt.Sprintf("--scale-down-simulation-timeout=%s spent", b.simulationTimeout)
	}
	return ""
}

// candidates applies the cheap filters.
func (p *Planner) candidates(in scaledown.PlannerInput) []candidate {
	var out []candidate
	for _, n := range in.Nodes {
		name := n.Name
		id := p.registry.NodeGroupIDForNode(name)
		if id == "" {
			p.unremovable.add(name, simulator.NotAutoscaled, "in no node group")
			continue
		}
		if in.BeingDeleted[name] {
			p.unremovable.add(name, simulator.CurrentlyBeingDeleted, "being removed")
			continue
		}
		if phase := in.Held[name]; phase != "" {
			p.unremovable.add(name, simulator.CurrentlyBeingDeleted, "held by "+phase)
			continue
		}
		if clusterstate.HasToBeDeletedTaint(n) {
			p.unremovable.add(name, simulator.CurrentlyBeingDeleted, "already being deleted (ToBeDeletedByClusterAutoscaler taint)")
			continue
		}
		if drain.NodeNotToDisrupt(n) {
			p.unremovable.add(name, simulator.ScaleDownDisabledAnnotation, "annotation "+scaledown.ScaleDownDisabledAnnotation+"=true or "+drain.DoNotDisruptKey+"=true")
			continue
		}
		gs, ok := p.registry.NodeGroup(id)
		if !ok {
			continue
		}
		if gs.Target <= gs.Group.MinSize() {
			p.unremovable.add(name, simulator.NodeGroupMinSizeReached, fmt.Sprintf("node group %s at min size %d", id, gs.Group.MinSize()))
			continue
		}
		var slices []*resourceapi.ResourceSlice
		if in.DRA != nil {
			slices = in.DRA.NodeSlices(name)
		}
		ready, _ := clusterstate.NodeReadiness(n)
		// As upstream's custom resources processors: a GPU node Ready
		// before its GPUs are (device plugin not advertising, DRA driver
		// not published yet) is unready, judged by --scale-down-unready-time,
		// not removed as empty while the pods it was added for wait for it.
		if ready && clusterstate.ResourceUnready(n, p.provider.GPULabel(), len(slices) > 0) {
			ready = false
		}
		if !ready && !p.opts.ScaleDownUnreadyEnabled {
			p.unremovable.add(name, simulator.ScaleDownUnreadyDisabled, "unready and --scale-down-unready-enabled=false")
			continue
		}
		pods := in.PodsByNode[name]
		var gpuResource apiv1.ResourceName
		threshold := gs.Options.ScaleDownUtilizationThreshold
		if gpu := p.provider.GetNodeGpuConfig(n); gpu != nil && gpu.ExtendedResourceName != "" {
			gpuResource = gpu.ExtendedResourceName
			threshold = gs.Options.ScaleDownGpuUtilizationThreshold
		}
		// A node's cpu/memory utilization comes from each pod's requests as
		// the cache last computed them (a pod changes rarely; the loop runs
		// every 10 s). Nodes with a GPU or devices: from the devices, as
		// utilization.CalculateWithClaims counts them.
		var (
			util utilization.Info
			err  error
		)
		if gpuResource == "" && len(slices) == 0 {
			util, err = podUtilization(p.requests, n, pods, p.opts.IgnoreDaemonSetsUtilization)
		} else {
			ni := framework.NewNodeInfo(n, pods...)
			var claims []*resourceapi.ResourceClaim
			if len(slices) > 0 {
				ni.SetResourceSlices(slices)
				claims = in.DRA.PodsClaims(pods)
			}
			util, err = utilization.CalculateWithClaims(ni, claims, p.opts.IgnoreDaemonSetsUtilization, gpuResource)
		}
		if err != nil {
			p.unremovable.add(name, simulator.UnexpectedError, fmt.Sprintf("cannot compute utilization: %v", err))
			continue
		}
		if ready && util.Utilization >= threshold {
			p.unremovable.add(name, simulator.NotUnderutilized, fmt.Sprintf("%s utilization %.2f is above the threshold %.2f", scaledown.ResourceLabel(util), util.Utilization, threshold))
			continue
		}
		// Drain rules (PDBs, safe-to-evict, local storage...) are cheap: check
		// them before the scheduling simulation.
		toMove, blocking := drain.PodsToMove(pods, in.PDBs, p.drainOpts, in.Now)
		if blocking != nil && blocking.Pod != nil {
			p.unremovable.add(name, simulator.BlockedByPod, scaledown.DescribeBlocking(blocking))
			continue
		}
		out = append(out, candidate{node: n, groupID: id, unready: !ready, empty: len(toMove) == 0, util: util, toMove: toMove})
	}
	return out
}

// Unneeded returns the unneeded nodes: empty ones first (removing them
// disrupts nothing), then the longest unneeded.
func (p *Planner) Unneeded() []*scaledown.UnneededNode {
	out := make([]*scaledown.UnneededNode, 0, len(p.unneeded))
	for _, c := range p.unneeded {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Empty != out[j].Empty {
			return out[i].Empty
		}
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].Node.Name < out[j].Node.Name
	})
	return out
}

// Forget drops a node from the unneeded set (e.g. its deletion started).
func (p *Planner) Forget(name string) { delete(p.unneeded, name) }

// UnneededCount is how many nodes the last Update found unneeded.
func (p *Planner) UnneededCount() int { return len(p.unneeded) }

// IsUnneeded reports whether the last Update found the node unneeded.
func (p *Planner) IsUnneeded(name string) bool { return p.unneeded[name] != nil }

// RecordUnremovable notes why an unneeded node is not removed now, without
// a log line (the caller logs its own).
func (p *Planner) RecordUnremovable(name string, reason simulator.UnremovableReason) {
	p.unremovable.record(name, reason)
}

// UnremovableCounts counts this loop's unremovable nodes by the
// unremovable_nodes_count reason label.
func (p *Planner) UnremovableCounts() map[string]int { return p.unremovable.countsByLabel() }
