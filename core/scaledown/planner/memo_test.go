package planner

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"reflect"
	"sort"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

var t0 = time.Unix(1_700_000_000, 0)

// fixture is one group of nodes (2 cpu, 4 GiB) with two 50m pods each, and
// three busy nodes (1500m used: above the utilization threshold) whose room
// (ten such pods each) comes first by name, so pods move there rather than
// onto the next candidate; production candidate limits lowered to 3 new
// non-empty nodes per loop, so that the unneeded set grows loop after loop
// (the ramp). The snapshot is
// rebuilt only after a change, as the autoscaler's incremental update does:
// an unchanged cluster keeps the snapshot's version.
type fixture struct {
	t        *testing.T
	opts     config.AutoscalingOptions
	provider *test.Provider
	registry *clusterstate.Registry
	checker  *simulator.PredicateChecker
	nodes    []*apiv1.Node
	pods     []*apiv1.Pod
	pdbs     []*policyv1.PodDisruptionBudget
	snap     *simulator.ClusterSnapshot
	dirty    bool
}

func newFixture(t *testing.T, nodes int) *fixture {
	t.Helper()
	o := config.Defaults()
	o.ScaleDownNonEmptyCandidatesCount = 3
	o.ScaleDownCandidatesPoolMinCount = 6
	f := &fixture{t: t, opts: o, provider: test.NewProvider(), dirty: true}
	f.provider.AddNodeGroup("g1", 1, 100, nodes+3, test.BuildTemplate("g1", 2000, 4*test.GiB, nil))
	for i := 0; i < 3; i++ {
		n := test.BuildNode(fmt.Sprintf("g1-a%d", i), 2000, 4*test.GiB)
		f.provider.AddNode("g1", n)
		f.nodes = append(f.nodes, n)
		p := test.BuildScheduledPod(fmt.Sprintf("busy-%d", i), 1500, 64*test.MiB, "rs-busy", n.Name)
		p.ResourceVersion = "1"
		f.pods = append(f.pods, p)
	}
	for i := 0; i < nodes; i++ {
		n := test.BuildNode(fmt.Sprintf("g1-n%02d", i), 2000, 4*test.GiB)
		f.provider.AddNode("g1", n)
		f.nodes = append(f.nodes, n)
		for j := 0; j < 2; j++ {
			p := test.BuildScheduledPod(fmt.Sprintf("p%02d-%d", i, j), 50, 64*test.MiB, "rs", n.Name)
			p.ResourceVersion = "1"
			p.Labels = map[string]string{"app": "web"}
			f.pods = append(f.pods, p)
		}
	}
	f.registry = clusterstate.NewRegistry(f.provider, o)
	if err := f.registry.UpdateNodes(f.nodes, t0); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.checker, err = simulator.NewPredicateChecker(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) planner() *Planner {
	return New(f.opts, f.provider, f.registry, f.checker, drain.NewOptions(f.opts, nil))
}

func (f *fixture) input(now time.Time) scaledown.PlannerInput {
	if f.dirty {
		f.snap = simulator.NewClusterSnapshot()
		if err := f.snap.SetClusterState(f.nodes, f.pods); err != nil {
			f.t.Fatal(err)
		}
		f.dirty = false
	}
	byNode := map[string][]*apiv1.Pod{}
	for _, p := range f.pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	return scaledown.PlannerInput{Snapshot: func() (*simulator.ClusterSnapshot, error) { return f.snap, nil },
		PodsByNode: byNode, Nodes: f.nodes, PDBs: f.pdbs, Now: now}
}

// outcome is what a loop decided: each unneeded node with its since time
// and where each of its pods would go, and why every other node stays.
// (Not for a loop that replayed the whole previous one: it keeps no records.)
type outcome struct {
	unneeded map[string]string
	stays    map[string]string
}

func (p *Planner) outcome() outcome {
	o := outcome{unneeded: map[string]string{}, stays: map[string]string{}}
	for _, u := range p.unneeded {
		var pods []string
		r := p.memo.records[u.Node.Name].removal
		for i, pod := range u.PodsToEvict {
			pods = append(pods, pod.Name+"→"+r.Destinations[i])
		}
		sort.Strings(pods)
		o.unneeded[u.Node.Name] = fmt.Sprintf("since %s, pods %v", u.Since.Sub(t0), pods)
	}
	for name, r := range p.unremovable.current {
		o.stays[name] = r.detail
	}
	return o
}

// fresh is a planner with p's unneeded nodes and no memo: what a loop
// decides when it simulates every node.
func (f *fixture) fresh(p *Planner) *Planner {
	q := f.planner()
	for k, v := range p.unneeded {
		cp := *v
		q.unneeded[k] = &cp
	}
	return q
}

// step runs one loop of p and of a fresh planner on the same input and
// fails when they differ.
func (f *fixture) step(p *Planner, now time.Time, what string) {
	f.t.Helper()
	q := f.fresh(p)
	in := f.input(now)
	if _, err := p.Update(in); err != nil {
		f.t.Fatal(err)
	}
	if _, err := q.Update(in); err != nil {
		f.t.Fatal(err)
	}
	if got, want := p.outcome(), q.outcome(); !reflect.DeepEqual(got, want) {
		f.t.Fatalf("%s: the loop that reuses simulations decided\n%v\nwant (every node simulated)\n%v", what, got, want)
	}
}

// During the ramp each loop finds 3 more unneeded nodes; the nodes known
// before are simulated in the previous loop's order from the same state,
// so their simulations are reused, and the outcome is the fresh one.
func TestRampReusesEachNodesSimulation(t *testing.T) {
	f := newFixture(t, 16)
	p := f.planner()
	now := t0
	for loop := 0; loop < 4; loop++ {
		reused := p.reused
		f.step(p, now, fmt.Sprintf("loop %d", loop))
		if got, want := len(p.unneeded), 3*(loop+1); got != want {
			t.Fatalf("loop %d: %d unneeded nodes, want %d (3 more each loop)", loop, got, want)
		}
		if loop > 0 && p.reused-reused < 3*loop {
			t.Fatalf("loop %d: %d simulations reused, want at least the %d nodes known before", loop, p.reused-reused, 3*loop)
		}
		now = now.Add(10 * time.Second)
	}
}

// Each change below makes a reused answer wrong; the loop must simulate
// again and decide as a fresh simulation does.
func TestRampDoesNotReuseStaleSimulations(t *testing.T) {
	cases := []struct {
		name   string
		change func(f *fixture, p *Planner)
	}{
		{"the destinations filled: the pods of the unneeded nodes no longer fit", func(f *fixture, p *Planner) {
			// Every node but the unneeded ones gets 1800m more: no room
			// left for their pods (their own pods are unchanged).
			for _, n := range f.nodes {
				if p.unneeded[n.Name] == nil {
					f.pods = append(f.pods, test.BuildScheduledPod("big-"+n.Name, 1800, 64*test.MiB, "rs-big", n.Name))
				}
			}
			f.dirty = true
		}},
		{"a pod added to a known unneeded node: it fits nowhere", func(f *fixture, p *Planner) {
			name := p.Unneeded()[0].Node.Name
			f.pods = append(f.pods, test.BuildScheduledPod("wide", 1900, 64*test.MiB, "rs-wide", name))
			f.dirty = true
		}},
		{"a PDB now allows no disruption of the pods", func(f *fixture, _ *Planner) {
			zero := intstr.FromInt32(0)
			f.pdbs = []*policyv1.PodDisruptionBudget{{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pdb-web", ResourceVersion: "2"},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
			}}
		}},
		{"an early unneeded node no longer a candidate (annotation): the pods it moved are not where they were", func(f *fixture, p *Planner) {
			// The snapshot is unchanged (an annotation is not read by the
			// scheduler): only the chain of removals tells.
			first := p.Unneeded()[0].Node
			for i, n := range f.nodes {
				if n.Name == first.Name {
					cp := n.DeepCopy()
					cp.Annotations = map[string]string{scaledown.ScaleDownDisabledAnnotation: "true"}
					f.nodes[i] = cp
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 12)
			p := f.planner()
			f.step(p, t0, "loop 0")
			f.step(p, t0.Add(10*time.Second), "loop 1")
			before := p.outcome()
			tc.change(f, p)
			f.step(p, t0.Add(20*time.Second), "after the change")
			if reflect.DeepEqual(p.outcome().unneeded, before.unneeded) {
				t.Fatalf("the change altered nothing: the test shows no stale reuse")
			}
		})
	}
}

// The allocation-free hasher is hash/fnv's FNV-1a over the same bytes.
func TestHasherIsFNV1a(t *testing.T) {
	h := newHasher()
	h.num(0x0102030405060708)
	h.str("pool-001-n042")
	h.bytes("\x00")
	ref := fnv.New64a()
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], 0x0102030405060708)
	ref.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], uint64(len("pool-001-n042")))
	ref.Write(buf[:])
	ref.Write([]byte("pool-001-n042"))
	ref.Write([]byte{0})
	if h.sum() != ref.Sum64() {
		t.Errorf("hasher %x, hash/fnv %x", h.sum(), ref.Sum64())
	}
}

// A pass asks the controller lookup once per controller.
func TestReplicasMemo(t *testing.T) {
	if replicasMemo(nil) != nil {
		t.Error("nil lookup wrapped")
	}
	calls := 0
	f := replicasMemo(func(ns string, ref metav1.OwnerReference) (int32, bool) {
		calls++
		return int32(len(ref.Name)), ref.UID != "gone"
	})
	rs := metav1.OwnerReference{Kind: "ReplicaSet", Name: "web-abc", UID: "u1"}
	for range 3 {
		if r, ok := f("default", rs); r != 7 || !ok {
			t.Errorf("got %d %v", r, ok)
		}
	}
	if _, ok := f("default", metav1.OwnerReference{Kind: "ReplicaSet", Name: "web-abc", UID: "gone"}); ok {
		t.Error("another UID answered from the first's entry")
	}
	f("other", rs)
	if calls != 3 {
		t.Errorf("%d lookups, want 3 (one per namespace, kind, name and UID)", calls)
	}
}
