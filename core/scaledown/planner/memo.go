package planner

import (
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

// simulationMemo is the previous loop's removal simulations, reused when
// nothing they read has changed: the snapshot's content (its Version: a
// kubelet's heartbeat does not change it), the candidates in order with
// what each must move, the destinations, the PDBs and which nodes were
// already unneeded. On an idle cluster every loop would otherwise
// re-simulate every unneeded node, to the same answer: at 1,000 nodes that
// was nearly all of a loop's CPU.
//
// When the candidates changed (a loop of the ramp, where each loop finds
// --scale-down-non-empty-candidates-count more unneeded nodes), each
// node's own simulation is reused instead (records): its outcome holds when
// the snapshot is in the state the previous loop simulated it in, i.e. the
// same content, destinations and PDBs at the start (base), the same
// removals committed before it, in the same order (before: failed
// simulations change nothing), and the node with the same pods to move.
// A removable node is then replayed: removed, its pods placed where they
// went, without the scheduler's plugins; the replay itself checks the pods
// and destinations and falls back to simulating.
//
// Not reused: after a loop whose --scale-down-simulation-timeout cut it
// short (where it stopped depends on the clock), and with DRA objects in
// the cluster (claims allocated in a simulation do not show in the
// snapshot's version).
type simulationMemo struct {
	key     uint64
	valid   bool
	results []memoResult
	notes   []memoNote
	// skipped and found are the budget's counts, for the loop's log line.
	skipped, found int
	why            string
	// records are the loop's simulations by node name.
	records map[string]memoRecord
}

// memoRecord is one node's simulation: its inputs, the removals committed
// before it (as a chain hash starting from the loop's base), and its
// outcome (removal, or why it stays).
type memoRecord struct {
	input, before uint64
	removal       *simulator.NodeToBeRemoved
	// stays: the node is not removable, for reason (detail says why).
	stays  bool
	reason simulator.UnremovableReason
	detail string
}

type memoResult struct {
	name        string
	empty       bool
	podsToEvict []*apiv1.Pod
	draDrivers  string
}

type memoNote struct {
	node   string
	reason simulator.UnremovableReason
	detail string
}

// simulationKey hashes what simulate reads besides the snapshot's content
// (in base): the candidates in order, each with its inputs and whether it
// was already unneeded.
func (p *Planner) simulationKey(base uint64, cands []candidate, inputs []uint64) uint64 {
	h := newHasher()
	h.num(base)
	h.num(uint64(len(cands)))
	for i, c := range cands {
		_, known := p.unneeded[c.node.Name]
		h.num(inputs[i])
		h.num(flags(known))
	}
	return h.sum()
}

// baseKey hashes what every simulation of a loop starts from: the
// snapshot's content, the destinations and the PDBs.
func baseKey(version uint64, dest map[string]bool, pdbs []*policyv1.PodDisruptionBudget) uint64 {
	h := newHasher()
	h.num(version)
	// In any order, as writePods: a sum of each name's hash, not a sort
	// of 1,000 names every loop.
	var sum uint64
	for n := range dest {
		d := newHasher()
		d.str(n)
		sum += d.sum()
	}
	h.num(uint64(len(dest)))
	h.num(sum)
	h.num(uint64(len(pdbs)))
	for _, b := range pdbs {
		h.str(string(b.UID))
		h.str(b.Namespace + "/" + b.Name)
		h.str(b.ResourceVersion)
	}
	return h.sum()
}

// candidateKey hashes what a node's own simulation reads of the candidate.
func candidateKey(c candidate) uint64 {
	h := newHasher()
	h.str(c.node.Name)
	h.str(c.groupID)
	h.num(flags(c.empty, c.unready))
	writePods(h.num, c.toMove)
	return h.sum()
}

// chain extends the hash of the removals committed so far with one more.
func chain(before uint64, r *simulator.NodeToBeRemoved) uint64 {
	h := newHasher()
	h.num(before)
	h.str(r.Node.Name)
	h.num(uint64(len(r.Destinations)))
	for i, d := range r.Destinations {
		h.str(string(r.PodsToReschedule[i].UID))
		h.str(d)
	}
	return h.sum()
}

// hasher is FNV-1a (64 bits, as hash/fnv's New64a) over the bytes written,
// without the allocations of hash.Hash64's Write: a loop hashes every
// destination's name and every candidate's pods.
type hasher struct{ h uint64 }

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func newHasher() *hasher { return &hasher{h: fnvOffset64} }

func (h *hasher) num(v uint64) {
	for i := 0; i < 8; i++ {
		h.h ^= v & 0xff
		h.h *= fnvPrime64
		v >>= 8
	}
}

func (h *hasher) str(s string) {
	h.num(uint64(len(s)))
	h.bytes(s)
}

// bytes writes s's bytes alone (no length).
func (h *hasher) bytes(s string) {
	for i := 0; i < len(s); i++ {
		h.h ^= uint64(s[i])
		h.h *= fnvPrime64
	}
}

func (h *hasher) sum() uint64 { return h.h }

func flags(bs ...bool) uint64 {
	var v uint64
	for i, b := range bs {
		if b {
			v |= 1 << i
		}
	}
	return v
}

// writePods writes the pods a candidate must move (which of its pods the drain
// rules skip depends on the time, e.g. long-terminating ones), in any order
// (the pod lister's order is not stable; the simulation takes the
// snapshot's).
func writePods(num func(uint64), pods []*apiv1.Pod) {
	var sum uint64
	for _, p := range pods {
		h := hasher{h: fnvOffset64}
		for _, s := range [...]string{string(p.UID), p.Namespace, p.Name, p.ResourceVersion} {
			h.bytes(s)
			h.bytes("\x00")
		}
		sum += h.sum()
	}
	num(uint64(len(pods)))
	num(sum)
}

// Simulated counts the loops that ran the removal simulations (the others
// reused the previous loop's).
func (p *Planner) Simulated() int { return p.simulated }

// Reused counts the nodes whose previous simulation a simulating loop
// reused instead of simulating them again.
func (p *Planner) Reused() int { return p.reused }
