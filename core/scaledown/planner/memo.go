package planner

import (
	"encoding/binary"
	"hash/fnv"
	"sort"

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

// simulationKey hashes what simulate reads besides the snapshot's content.
func (p *Planner) simulationKey(version uint64, cands []candidate, dest map[string]bool, pdbs []*policyv1.PodDisruptionBudget) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		_, _ = h.Write(buf[:])
	}
	str := func(s string) {
		num(uint64(len(s)))
		_, _ = h.Write([]byte(s))
	}
	num(version)
	num(uint64(len(cands)))
	for _, c := range cands {
		_, known := p.unneeded[c.node.Name]
		str(c.node.Name)
		str(c.groupID)
		num(flags(c.empty, c.unready, known))
		writePods(num, c.toMove)
	}
	names := make([]string, 0, len(dest))
	for n := range dest {
		names = append(names, n)
	}
	sort.Strings(names)
	num(uint64(len(names)))
	for _, n := range names {
		str(n)
	}
	num(uint64(len(pdbs)))
	for _, b := range pdbs {
		str(string(b.UID))
		str(b.Namespace + "/" + b.Name)
		str(b.ResourceVersion)
	}
	return h.Sum64()
}

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
		h := fnv.New64a()
		for _, s := range []string{string(p.UID), p.Namespace, p.Name, p.ResourceVersion} {
			_, _ = h.Write([]byte(s))
			_, _ = h.Write([]byte{0})
		}
		sum += h.Sum64()
	}
	num(uint64(len(pods)))
	num(sum)
}

// Simulated counts the loops that ran the removal simulations (the others
// reused the previous loop's).
func (p *Planner) Simulated() int { return p.simulated }
