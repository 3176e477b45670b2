package simulator

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// RemovalSimulator answers "could this node go, and where would its pods go".
type RemovalSimulator struct {
	checker  *PredicateChecker
	snapshot *ClusterSnapshot
	opts     drain.Options
	// unbound is the copy a pod without claims is checked as, written
	// over for each: nothing keeps the checked pod past its check (the
	// snapshot stores the pod itself), and a copy a pod made every hop of
	// a chain of removals copy all the pods piled onto its node again.
	unbound apiv1.Pod
	// excluded nodes take no pod, whatever the destinations say (Exclude).
	excluded map[string]bool
	// preFilters share PreFilter's outcome between equivalent pods for the
	// simulator's life: one pass.
	preFilters preFilterMemo
}

// Exclude keeps pods off the named nodes in every later simulation, as
// when they leave too: a set removed together, whose later nodes must not
// take the earlier ones' pods. Cheaper, on a large cluster, than a
// destinations map of every other node.
func (r *RemovalSimulator) Exclude(names map[string]bool) { r.excluded = names }

// NewRemovalSimulator returns a simulator working on s, for one pass of
// simulations (a loop's).
func NewRemovalSimulator(c *PredicateChecker, s *ClusterSnapshot, opts drain.Options) *RemovalSimulator {
	return &RemovalSimulator{checker: c, snapshot: s, opts: opts, preFilters: preFilterMemo{}}
}

// NodeToBeRemoved is a node that can go and the pods that must move.
type NodeToBeRemoved struct {
	Node             *apiv1.Node
	PodsToReschedule []*apiv1.Pod
	// Destinations[i] is the node the simulation placed PodsToReschedule[i]
	// on: what ReplayNodeRemoval repeats.
	Destinations []string
	// placed[i] is the object the snapshot held for PodsToReschedule[i] on
	// Destinations[i]: a replay moving the same pod object stores the same
	// object again (so, loop after loop, do the removals after it that move
	// it on). For a pod without claims it is PodsToReschedule[i] itself.
	placed []*apiv1.Pod
}

// UnremovableNode is a node that cannot go, and why.
type UnremovableNode struct {
	Node        *apiv1.Node
	Reason      UnremovableReason
	BlockingPod *drain.BlockingPod
}

// String describes the node and why it stays, for logs.
func (u *UnremovableNode) String() string {
	if u == nil {
		return "<removable>"
	}
	name := ""
	if u.Node != nil {
		name = u.Node.Name
	}
	s := name + ": " + u.Reason.String()
	if u.BlockingPod != nil && u.BlockingPod.Pod != nil {
		s += " (pod " + u.BlockingPod.Pod.Namespace + "/" + u.BlockingPod.Pod.Name + ": " + u.BlockingPod.Reason.String() + ")"
	}
	return s
}

// SimulateNodeRemoval checks that every pod that must leave nodeName (per
// drain.PodsToMove) fits some other node: one in destinations when it is
// non-nil, any node still in the snapshot otherwise (nodes removed by earlier
// successful simulations are gone from it). Pods are placed one after the
// other, so later pods see the load of earlier ones. On success the snapshot
// is left with the node removed and its pods placed (the caller Forks to keep
// or drop that); on failure the snapshot is unchanged.
func (r *RemovalSimulator) SimulateNodeRemoval(nodeName string, destinations map[string]bool, pdbs []*policyv1.PodDisruptionBudget, now time.Time) (*NodeToBeRemoved, *UnremovableNode) {
	return r.removeNode(nodeName, destinations, pdbs, now, nil)
}

// ReplayNodeRemoval repeats a removal SimulateNodeRemoval found on a
// snapshot in the same state (the caller's to know: the same content, and
// the same removals before it): the node goes and each pod that must leave
// is placed where prev placed it, without running the scheduler's plugins
// again. It gives up (false, snapshot unchanged) when the pods to move are
// not prev's, one by one, or a destination is no longer in the snapshot or
// in destinations, or a pod holds devices (they are allocated by
// the search): the caller then simulates.
func (r *RemovalSimulator) ReplayNodeRemoval(prev *NodeToBeRemoved, destinations map[string]bool, pdbs []*policyv1.PodDisruptionBudget, now time.Time) (*NodeToBeRemoved, bool) {
	if prev == nil || prev.Node == nil || len(prev.Destinations) != len(prev.PodsToReschedule) {
		return nil, false
	}
	removal, unremovable := r.removeNode(prev.Node.Name, destinations, pdbs, now, prev)
	if removal == nil || unremovable != nil {
		return nil, false
	}
	return removal, true
}

// removeNode is SimulateNodeRemoval, or with replay its repetition: then it
// returns (nil, nil) when replay does not apply.
func (r *RemovalSimulator) removeNode(nodeName string, destinations map[string]bool, pdbs []*policyv1.PodDisruptionBudget, now time.Time, replay *NodeToBeRemoved) (*NodeToBeRemoved, *UnremovableNode) {
	info, found := r.snapshot.nodes[nodeName]
	if !found && replay != nil {
		return nil, nil
	}
	if !found {
		klog.InfoS("Scale-down simulation: node is not in the cluster snapshot", "node", klog.KRef("", nodeName))
		return nil, &UnremovableNode{Node: &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, Reason: NoNodeInfo}
	}
	node := info.Node()
	pods := make([]*apiv1.Pod, 0, len(info.Pods))
	podInfos := make(map[*apiv1.Pod]*schedframework.PodInfo, len(info.Pods))
	for _, pi := range info.Pods {
		pods = append(pods, pi.GetPod())
		if concrete, ok := pi.(*schedframework.PodInfo); ok {
			podInfos[pi.GetPod()] = concrete
		}
	}

	toMove, blocking := drain.PodsToMove(pods, pdbs, r.opts, now)
	if replay != nil && (blocking != nil || !r.replayable(replay, toMove, destinations)) {
		return nil, nil
	}
	if blocking != nil {
		klog.V(2).InfoS("Node cannot be removed: a pod blocks it", "node", klog.KRef("", nodeName), "pod", klog.KObj(blocking.Pod), "reason", blocking.Reason.String())
		return nil, &UnremovableNode{Node: node, Reason: BlockedByPod, BlockingPod: blocking}
	}

	r.snapshot.Fork()
	if err := r.snapshot.RemoveNode(nodeName); err != nil {
		r.snapshot.Revert()
		klog.ErrorS(err, "Scale-down simulation failed", "node", klog.KRef("", nodeName))
		return nil, &UnremovableNode{Node: node, Reason: UnexpectedError}
	}
	// The node's pods stop using their claims; a claim no pod uses any more
	// is deallocated, so a moved pod gets a device again only where the
	// allocator finds an equivalent one.
	for _, p := range pods {
		r.snapshot.dra.UnreservePodClaims(p)
	}
	match := func(ni *schedframework.NodeInfo) bool {
		name := ni.Node().Name
		return (destinations == nil || destinations[name]) && !r.excluded[name]
	}
	// Equivalent pods resume where the previous one landed.
	hints := map[uint64]int{}
	placedOn := make([]string, 0, len(toMove))
	placedPods := make([]*apiv1.Pod, 0, len(toMove))
	for i, p := range toMove {
		holdsDevices := r.snapshot.mayHoldDevices(p)
		if replay != nil && i < len(replay.placed) && replay.PodsToReschedule[i] == p && !holdsDevices {
			// The same object as the previous loop moved: its copy then
			// is what withNodeName would give now.
			dest, placed := replay.Destinations[i], replay.placed[i]
			if err := r.place(podInfos[p], placed, dest); err != nil {
				r.snapshot.Revert()
				klog.ErrorS(err, "Scale-down simulation: placing a pod failed", "node", klog.KRef("", nodeName), "pod", klog.KObj(p), "destination", dest)
				return nil, &UnremovableNode{Node: node, Reason: UnexpectedError}
			}
			placedOn, placedPods = append(placedOn, dest), append(placedPods, placed)
			continue
		}
		// The check runs on an unbound copy, so that the NodeName filter does
		// not tie the pod to the node it leaves. A pod with devices gets its
		// own: the claims' reservation below is made for it.
		var moved *apiv1.Pod
		if holdsDevices {
			moved = withNodeName(p, "")
		} else {
			r.unbound = *p
			r.unbound.Spec.NodeName = ""
			moved = &r.unbound
		}
		var (
			dest string
			pf   *preFilterOutcome
			err  error
		)
		if replay != nil {
			dest = replay.Destinations[i]
		} else {
			h := r.checker.hints.hash(moved)
			var idx int
			idx, dest, pf, err = r.checker.fitsAnyNodeShared(r.snapshot, moved, match, hints[h], r.preFilters, h)
			if err == nil {
				hints[h] = idx
			}
		}
		if err != nil {
			r.snapshot.Revert()
			if pe, ok := err.(*PredicateError); ok && pe.IsInternal() {
				klog.ErrorS(err, "Scale-down simulation failed", "node", klog.KRef("", nodeName))
				return nil, &UnremovableNode{Node: node, Reason: UnexpectedError}
			}
			klog.V(2).InfoS("Node cannot be removed: a pod has no place to go", "node", klog.KRef("", nodeName), "pod", klog.KObj(p), "reason", err.Error())
			return nil, &UnremovableNode{Node: node, Reason: NoPlaceToMovePods}
		}
		placedOn = append(placedOn, dest)
		reserved, err := r.checker.reserveClaims(r.snapshot, pf, moved, dest)
		if err != nil {
			r.snapshot.Revert()
			klog.ErrorS(err, "Scale-down simulation failed", "node", klog.KRef("", nodeName))
			return nil, &UnremovableNode{Node: node, Reason: UnexpectedError}
		}
		// dest holds the pod itself, still naming the node it left: no
		// Filter reads the NodeName of the pods a node holds, and a copy
		// held there would live as long as the memo's replays of this
		// removal (one a moved pod, 0.6 MB at 1,000 nodes). (A pod with
		// devices gets a copy bound to dest: the reservation above was made
		// for that pod by name and node, and it names the claim made for
		// its extended resources.)
		placed := p
		if holdsDevices {
			placed = withNodeName(reserved, dest)
		}
		if err := r.place(podInfos[p], placed, dest); err != nil {
			r.snapshot.Revert()
			klog.ErrorS(err, "Scale-down simulation: placing a pod failed", "node", klog.KRef("", nodeName), "pod", klog.KObj(p), "destination", dest)
			return nil, &UnremovableNode{Node: node, Reason: UnexpectedError}
		}
		placedPods = append(placedPods, placed)
		if v := klog.V(4); v.Enabled() { // arguments escape even when not logged
			v.InfoS("Scale-down simulation: pod would move", "pod", klog.KObj(p), "node", klog.KRef("", nodeName), "destination", dest)
		}
	}
	if err := r.snapshot.Commit(); err != nil {
		klog.ErrorS(err, "Scale-down simulation failed", "node", klog.KRef("", nodeName))
		return nil, &UnremovableNode{Node: node, Reason: UnexpectedError}
	}
	// Every loop re-checks every unneeded node: the planner logs the
	// changes at --v=2 (newly unneeded, needed again).
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Node can be removed: its pods to move fit elsewhere", "node", klog.KRef("", nodeName), "podsToMove", len(toMove))
	}
	return &NodeToBeRemoved{Node: node, PodsToReschedule: toMove, Destinations: placedOn, placed: placedPods}, nil
}

// place stores placed, the pod or its copy bound to dest, reusing the scheduler's
// bookkeeping of pod on its current node (src) when there is one.
func (r *RemovalSimulator) place(src *schedframework.PodInfo, placed *apiv1.Pod, dest string) error {
	var err error
	if src != nil {
		err = r.snapshot.addPodInfo(sharePodInfo(src, placed), dest)
	} else {
		err = r.snapshot.AddEquivalentPod(placed, nil, dest)
	}
	return err
}

// replayable reports whether replay still holds: toMove are replay's pods
// (same objects by UID and version, in order), none holds devices, and every
// destination is still in the snapshot and allowed.
func (r *RemovalSimulator) replayable(replay *NodeToBeRemoved, toMove []*apiv1.Pod, destinations map[string]bool) bool {
	if len(toMove) != len(replay.PodsToReschedule) {
		return false
	}
	for i, p := range toMove {
		q := replay.PodsToReschedule[i]
		if p.UID != q.UID || p.Namespace != q.Namespace || p.Name != q.Name || p.ResourceVersion != q.ResourceVersion ||
			r.snapshot.mayHoldDevices(p) {
			return false
		}
		d := replay.Destinations[i]
		if _, ok := r.snapshot.nodes[d]; !ok || d == replay.Node.Name || destinations != nil && !destinations[d] || r.excluded[d] {
			return false
		}
	}
	return true
}

// hintHashes caches schedulingHash for the removal simulation's hints, by
// pod UID and resourceVersion: every loop re-simulates every unneeded node,
// and the JSON encoding of each moved pod was 14% of a simulation's CPU. A
// hint only says where the search for a fit starts (it wraps around), so
// a stale entry (a pod changed without a new resourceVersion, as only
// hand-built pods are) costs Filter calls, never a wrong answer; grouping
// pods as equivalent (GroupPods) does not use it.
//
// It keeps two generations, turned by TurnHints once a loop (the
// scale-down planner's pass): what the last two loops hashed, an entry
// moving on while a loop uses it. Turned by a count instead (it was 65,536
// entries), a cluster whose pods come and go kept up to twice that of pods
// long gone, and their strings with them.
type hintHashes struct {
	cur, prev map[hintID]uint64
}

type hintID struct {
	uid      types.UID
	rv, node string
}

// TurnHints starts a loop's simulations: the hints' hashes the last loop
// used become the older generation, and those no loop used since go.
func (c *PredicateChecker) TurnHints() {
	c.hints.prev, c.hints.cur = c.hints.cur, make(map[hintID]uint64, len(c.hints.cur))
}

func (c *hintHashes) hash(p *apiv1.Pod) uint64 {
	if p.UID == "" {
		return schedulingHash(p)
	}
	id := hintID{uid: p.UID, rv: p.ResourceVersion, node: p.Spec.NodeName}
	if h, ok := c.cur[id]; ok {
		return h
	}
	h, ok := c.prev[id]
	if !ok {
		h = schedulingHash(p)
	}
	if c.cur == nil {
		c.cur = make(map[hintID]uint64)
	}
	c.cur[id] = h
	return h
}
