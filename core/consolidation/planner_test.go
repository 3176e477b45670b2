package consolidation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// cluster is a planner test's cluster: nodes of cpu millicores (4 GiB of
// memory per cpu) with a price each, and pods of cpu millicores on them.
type cluster struct {
	nodes  []*apiv1.Node
	pods   []*apiv1.Pod
	pdbs   []*policyv1.PodDisruptionBudget
	prices map[string]float64
}

func newCluster() *cluster { return &cluster{prices: map[string]float64{}} }

func (c *cluster) node(name string, milliCPU int64, price float64, pods ...int64) *apiv1.Node {
	n := test.BuildNode(name, milliCPU, milliCPU*4*test.MiB)
	c.nodes = append(c.nodes, n)
	c.prices[name] = price
	for i, p := range pods {
		pod := test.BuildScheduledPod(fmt.Sprintf("%s-p%d", name, i), p, 64*test.MiB, "rs-app", name)
		pod.Labels = map[string]string{"app": "web"}
		c.pods = append(c.pods, pod)
	}
	return n
}

func (c *cluster) pdb(allowed int32) {
	c.pdbs = append(c.pdbs, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

// candidates are the named nodes, as Candidates orders them.
func (c *cluster) candidates(names ...string) []Candidate {
	byNode := map[string][]*apiv1.Pod{}
	for _, p := range c.pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out, _, _ := Candidates(CandidateInput{
		Nodes: c.nodes, PodsByNode: byNode,
		GroupOf: func(n string) (Group, bool) { return Group{ID: "g", Consolidate: want[n]}, true },
		Ready:   func(*apiv1.Node) bool { return true },
		Price:   func(n *apiv1.Node) (float64, error) { return c.prices[n.Name], nil },
	})
	return out
}

func replacement(size string, milliCPU int64, price float64) Replacement {
	return Replacement{Size: size, Template: test.BuildTemplate(size, milliCPU, milliCPU*4*test.MiB, nil), Price: price, Room: 5}
}

func labelled(r Replacement, k, v string) Replacement {
	r.Template.Node().Labels[k] = v
	return r
}

func tainted(r Replacement, taint apiv1.Taint) Replacement {
	r.Template.Node().Spec.Taints = append(r.Template.Node().Spec.Taints, taint)
	return r
}

func (c *cluster) input(t *testing.T, names []string, maxNodes int, threshold float64, repl ...Replacement) Input {
	t.Helper()
	snap := simulator.NewClusterSnapshot()
	if err := snap.SetClusterState(c.nodes, c.pods); err != nil {
		t.Fatal(err)
	}
	return Input{
		Snapshot: snap, Checker: sdtest.Checker(t), DrainOptions: sdtest.DrainOptions(sdtest.Options()), PDBs: c.pdbs,
		Candidates: c.candidates(names...), Replacements: repl, Removable: map[string]int{"g": 10},
		Threshold: threshold, MaxNodes: maxNodes, Now: sdtest.T0,
	}
}

// Which command the planner proposes for which cluster.
func TestPlan(t *testing.T) {
	small, large := replacement("s-2vcpu", 2000, 1), replacement("s-8vcpu", 8000, 6)
	for _, tc := range []struct {
		name  string
		build func(c *cluster)
		cands []string
		max   int
		thr   float64
		repl  []Replacement
		want  string // Command.Key(), "" for none
	}{
		{name: "pods fit the free room of the others: delete", build: func(c *cluster) {
			c.node("a", 4000, 4, 1000)
			c.node("b", 4000, 4, 1000)
			c.node("c", 4000, 4, 1000)
		}, cands: []string{"a", "b", "c"}, max: 3, thr: 0.1, repl: []Replacement{small, large}, want: "delete:a,b"},
		{name: "the budget bounds the nodes of one command", build: func(c *cluster) {
			c.node("a", 4000, 4, 1000)
			c.node("b", 4000, 4, 1000)
			c.node("c", 4000, 4, 1000)
		}, cands: []string{"a", "b", "c"}, max: 1, thr: 0.1, repl: []Replacement{small, large}, want: "delete:a"},
		{name: "three half-used nodes: the command that saves most", build: func(c *cluster) {
			c.node("a", 4000, 4, 1500)
			c.node("b", 4000, 4, 1500)
			c.node("c", 4000, 4, 1500)
			// Two replaced by a small node (4+1 = $5/h left) beat three by a large one ($6/h).
		}, cands: []string{"a", "b", "c"}, max: 3, thr: 0.1, repl: []Replacement{small, large}, want: "replace:a,b->1xs-2vcpu"},
		{name: "three nodes into one large node", build: func(c *cluster) {
			c.node("a", 4000, 4, 2500)
			c.node("b", 4000, 4, 2500)
			c.node("c", 4000, 4, 2500)
		}, cands: []string{"a", "b", "c"}, max: 3, thr: 0.1, repl: []Replacement{small, large}, want: "replace:a,b,c->1xs-8vcpu"},
		{name: "two nodes save nothing on a bigger node, three save a third", build: func(c *cluster) {
			// DigitalOcean's prices: twice the size costs twice as much.
			c.node("a", 4000, 4, 2200)
			c.node("b", 4000, 4, 2200)
			c.node("c", 4000, 4, 2200)
		}, cands: []string{"a", "b", "c"}, max: 3, thr: 0.1, repl: []Replacement{replacement("s-8vcpu", 8000, 8)}, want: "replace:a,b,c->1xs-8vcpu"},
		{name: "a budget below the merge: the step is weighed by its own saving", build: func(c *cluster) {
			c.node("a", 4000, 4, 2200)
			c.node("b", 4000, 4, 2200)
			c.node("c", 4000, 4, 2200)
			// Within the budget a,b on a 6-cpu node save 2.5 now; a,b on the
			// 8-cpu node save 1 now, and more only if a later command
			// finishes the merge.
		}, cands: []string{"a", "b", "c"}, max: 2, thr: 0.1, repl: []Replacement{replacement("s-6vcpu", 6000, 5.5), replacement("s-8vcpu", 8000, 7)}, want: "replace:a,b->1xs-6vcpu"},
		{name: "a budget below the merge: the step when nothing within the budget saves", build: func(c *cluster) {
			c.node("a", 4000, 4, 2200)
			c.node("b", 4000, 4, 2200)
			c.node("c", 4000, 4, 2200)
		}, cands: []string{"a", "b", "c"}, max: 2, thr: 0.1, repl: []Replacement{replacement("s-8vcpu", 8000, 7)}, want: "replace:a,b->1xs-8vcpu"},
		{name: "budget 1: deleting a node outright beats the first step of a merge", build: func(c *cluster) {
			c.node("x", 4000, 8, 500)
			c.node("a", 4000, 4, 2200)
			c.node("b", 4000, 4, 2200)
			c.node("c", 4000, 4, 2200)
			// The merge of all four on the 8-cpu node saves 13; its first
			// step (x onto it) saves 1 and buys a droplet; deleting x saves 8.
		}, cands: []string{"x", "a", "b", "c"}, max: 1, thr: 0.1, repl: []Replacement{replacement("s-8vcpu", 8000, 7)}, want: "delete:x"},
		{name: "budget 2: a single-node delete that saves more beats a multi-node replace", build: func(c *cluster) {
			c.node("x", 4000, 8, 500)
			c.node("a", 4000, 4, 2200)
			c.node("b", 4000, 4, 2200)
			c.node("c", 4000, 4, 2200)
			// x,a onto a 4-cpu node save 6; deleting x alone saves 8.
		}, cands: []string{"x", "a", "b", "c"}, max: 2, thr: 0.1, repl: []Replacement{replacement("s-4vcpu", 4000, 6), replacement("s-8vcpu", 8000, 7)}, want: "delete:x"},
		{name: "a budget below the merge: the bigger node only if it saves enough now", build: func(c *cluster) {
			c.node("a", 4000, 4, 2200)
			c.node("b", 4000, 4, 2200)
			c.node("c", 4000, 4, 2200)
		}, cands: []string{"a", "b", "c"}, max: 2, thr: 0.1, repl: []Replacement{replacement("s-6vcpu", 6000, 5.5), replacement("s-8vcpu", 8000, 7.5)}, want: "replace:a,b->1xs-6vcpu"},
		{name: "one node swapped for a cheaper size", build: func(c *cluster) {
			c.node("big", 8000, 6, 1500)
			c.node("full", 2000, 1, 2000)
		}, cands: []string{"big"}, max: 1, thr: 0.1, repl: []Replacement{small, large}, want: "replace:big->1xs-2vcpu"},
		{name: "a pod selecting its node's label stays off a replacement without it", build: func(c *cluster) {
			n := c.node("db", 8000, 6, 1500)
			n.Labels["tier"] = "db"
			c.pods[len(c.pods)-1].Spec.NodeSelector = map[string]string{"tier": "db"}
			c.node("full", 2000, 1, 2000)
		}, cands: []string{"db"}, max: 1, thr: 0.1, repl: []Replacement{small}, want: ""},
		{name: "a pod selecting its node's label moves to a replacement with it", build: func(c *cluster) {
			n := c.node("db", 8000, 6, 1500)
			n.Labels["tier"] = "db"
			c.pods[len(c.pods)-1].Spec.NodeSelector = map[string]string{"tier": "db"}
			c.node("full", 2000, 1, 2000)
		}, cands: []string{"db"}, max: 1, thr: 0.1, repl: []Replacement{labelled(replacement("s-2vcpu-db", 2000, 1), "tier", "db")}, want: "replace:db->1xs-2vcpu-db"},
		{name: "a tainted node is never replaced by a node without its taint", build: func(c *cluster) {
			n := c.node("dedicated", 8000, 6, 1500)
			n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "db", Effect: apiv1.TaintEffectNoSchedule}}
			c.pods[len(c.pods)-1].Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpEqual, Value: "db", Effect: apiv1.TaintEffectNoSchedule}}
			c.node("full", 2000, 1, 2000)
		}, cands: []string{"dedicated"}, max: 1, thr: 0.1, repl: []Replacement{small}, want: ""},
		{name: "a tainted node may be replaced by a node with its taint", build: func(c *cluster) {
			n := c.node("dedicated", 8000, 6, 1500)
			n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "db", Effect: apiv1.TaintEffectNoSchedule}}
			c.pods[len(c.pods)-1].Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpEqual, Value: "db", Effect: apiv1.TaintEffectNoSchedule}}
			c.node("full", 2000, 1, 2000)
		}, cands: []string{"dedicated"}, max: 1, thr: 0.1, repl: []Replacement{tainted(replacement("s-2vcpu-d", 2000, 1), apiv1.Taint{Key: "dedicated", Value: "db", Effect: apiv1.TaintEffectNoSchedule})}, want: "replace:dedicated->1xs-2vcpu-d"},
		{name: "a saving under the threshold is refused", build: func(c *cluster) {
			c.node("big", 8000, 6, 1500)
			c.node("full", 2000, 1, 2000)
		}, cands: []string{"big"}, max: 1, thr: 0.1, repl: []Replacement{replacement("s-2vcpu", 2000, 5.5)}, want: ""},
		{name: "nothing cheaper holds the pods", build: func(c *cluster) {
			c.node("big", 8000, 6, 5000)
			c.node("full", 2000, 1, 2000)
		}, cands: []string{"big"}, max: 1, thr: 0.1, repl: []Replacement{small, large}, want: ""},
		{name: "a PodDisruptionBudget that allows no disruption blocks", build: func(c *cluster) {
			c.node("a", 4000, 4, 1000)
			c.node("b", 4000, 4, 1000)
			c.pdb(0)
		}, cands: []string{"a", "b"}, max: 2, thr: 0.1, repl: []Replacement{small}, want: ""},
		{name: "a PodDisruptionBudget that allows one disruption: its pods leave in turn", build: func(c *cluster) {
			c.node("a", 4000, 4, 1000, 1000)
			c.node("b", 4000, 4, 1000)
			c.node("c", 4000, 4, 1000)
			c.pdb(1)
		}, cands: []string{"a", "b"}, max: 2, thr: 0.1, want: "delete:a,b"},
		{name: "a node not among the candidates stays", build: func(c *cluster) {
			c.node("a", 4000, 4, 1000)
			c.node("b", 4000, 4, 1000)
		}, cands: []string{"b"}, max: 2, thr: 0.1, want: "delete:b"},
		{name: "budget zero", build: func(c *cluster) {
			c.node("a", 4000, 4, 1000)
			c.node("b", 4000, 4, 1000)
		}, cands: []string{"a", "b"}, max: 0, thr: 0.1, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster()
			tc.build(c)
			in := c.input(t, tc.cands, tc.max, tc.thr, tc.repl...)
			before := in.Snapshot.NodeNames()
			got := Plan(in)
			key := ""
			if got != nil {
				key = got.Key()
			}
			if key != tc.want {
				t.Errorf("got %q, want %q", key, tc.want)
			}
			if after := in.Snapshot.NodeNames(); len(after) != len(before) || in.Snapshot.ForkDepth() != 0 {
				t.Errorf("the snapshot changed: %v -> %v (fork depth %d)", before, after, in.Snapshot.ForkDepth())
			}
		})
	}
}

// After the first step of a merge larger than the budget, the next
// command deletes the remaining node onto the new node's free room; the
// new node, holding pods of a workload a command moved within the
// cooldown, is no candidate, and is one again once the cooldown is over.
func TestPlanMergeContinuesOntoTheReplacement(t *testing.T) {
	c := newCluster()
	c.node("c", 4000, 4, 2200)
	c.node("new", 8000, 7)
	var moved []*apiv1.Pod
	for i := range 2 {
		p := test.BuildScheduledPod(fmt.Sprintf("moved-%d", i), 2200, 64*test.MiB, "rs-moved", "new")
		c.pods = append(c.pods, p)
		moved = append(moved, p)
	}
	in := c.input(t, nil, 2, 0.1, replacement("s-2vcpu", 2000, 1), replacement("s-6vcpu", 6000, 5.5))
	byNode := map[string][]*apiv1.Pod{}
	for _, p := range c.pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	ledger := NewLedger(time.Hour)
	ledger.Record(moved, sdtest.T0)
	candidates := func(now time.Time) ([]Candidate, []Skipped) {
		cands, skipped, _ := Candidates(CandidateInput{
			Nodes: c.nodes, PodsByNode: byNode,
			GroupOf: func(string) (Group, bool) { return Group{ID: "g", Consolidate: true}, true },
			Ready:   func(*apiv1.Node) bool { return true },
			Price:   func(n *apiv1.Node) (float64, error) { return c.prices[n.Name], nil },
			Moved:   func(p *apiv1.Pod) bool { return ledger.Recent(p, now) },
		})
		return cands, skipped
	}
	cands, skipped := candidates(sdtest.T0.Add(59 * time.Minute))
	if len(cands) != 1 || cands[0].Node.Name != "c" || len(skipped) != 1 || !strings.Contains(skipped[0].Why, "holds 2 pod(s)") {
		t.Fatalf("candidates %v, skipped %v: want c, and new skipped for its 2 moved pods", cands, skipped)
	}
	in.Candidates = cands
	if got := Plan(in); got == nil || got.Key() != "delete:c" {
		t.Fatalf("got %v, want delete:c", got)
	}
	if cands, _ := candidates(sdtest.T0.Add(time.Hour)); len(cands) != 2 {
		t.Errorf("after the cooldown, %d candidates, want 2", len(cands))
	}
	ledger.Prune(sdtest.T0.Add(time.Hour))
	if ledger.Len() != 0 {
		t.Errorf("the ledger holds %d workloads after their cooldown, want 0", ledger.Len())
	}
}

func TestPlanSavingAndMinSize(t *testing.T) {
	c := newCluster()
	c.node("big", 8000, 6, 1500)
	c.node("full", 2000, 1, 2000)
	in := c.input(t, []string{"big"}, 1, 0.1, replacement("s-2vcpu", 2000, 1))
	got := Plan(in)
	if got == nil || got.Saving != 5 || got.RemovedPrice != 6 || !strings.Contains(got.String(), "saving $5.0000/h") {
		t.Fatalf("got %+v", got)
	}
	in.Removable = map[string]int{"g": 0}
	if got := Plan(in); got != nil {
		t.Errorf("at its group's min size the node stays; got %s", got)
	}
}

// Nodes and pods marked not to be disrupted, nodes of groups not
// consolidatable and nodes being removed are never candidates.
func TestCandidates(t *testing.T) {
	c := newCluster()
	c.node("plain", 4000, 4, 1000)
	c.node("empty", 4000, 4)
	c.node("safe", 4000, 4, 1000)
	c.node("karpenter-pod", 4000, 4, 1000)
	c.node("disabled", 4000, 4).Annotations = map[string]string{drain.ScaleDownDisabledKey: "true"}
	c.node("karpenter-node", 4000, 4).Annotations = map[string]string{drain.DoNotDisruptKey: "true"}
	c.node("other-group", 4000, 4)
	c.node("deleting", 4000, 4)
	c.node("scale-downs", 4000, 4, 500)
	for _, p := range c.pods {
		switch p.Spec.NodeName {
		case "safe":
			p.Annotations = map[string]string{drain.SafeToEvictKey: "false"}
		case "karpenter-pod":
			p.Annotations = map[string]string{drain.DoNotDisruptKey: "true"}
		}
	}
	byNode := map[string][]*apiv1.Pod{}
	for _, p := range c.pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	got, skipped, _ := Candidates(CandidateInput{
		Nodes: c.nodes, PodsByNode: byNode,
		GroupOf:           func(n string) (Group, bool) { return Group{ID: "g", Consolidate: n != "other-group"}, true },
		Ready:             func(*apiv1.Node) bool { return true },
		Price:             func(n *apiv1.Node) (float64, error) { return c.prices[n.Name], nil },
		BeingDeleted:      map[string]bool{"deleting": true},
		ScaleDownUnneeded: func(n string) bool { return n == "scale-downs" },
	})
	var names []string
	for _, g := range got {
		names = append(names, g.Node.Name)
	}
	if strings.Join(names, ",") != "empty,plain" {
		t.Errorf("candidates %v, want empty (no pod to move) then plain", names)
	}
	why := map[string]string{}
	for _, s := range skipped {
		why[s.Node] = s.Why
	}
	for node, want := range map[string]string{
		"safe": "marked not to be disrupted", "karpenter-pod": "marked not to be disrupted",
		"disabled": "scale-down-disabled", "karpenter-node": "do-not-disrupt", "deleting": "being removed",
		"scale-downs": "unneeded for scale-down",
	} {
		if !strings.Contains(why[node], want) {
			t.Errorf("%s skipped for %q, want %q", node, why[node], want)
		}
	}
	if _, ok := why["other-group"]; ok {
		t.Error("a node of a group not consolidatable is not even considered")
	}
}

// The planner's work is bounded: when nothing fits, every multi-node
// length, single node and replacement size would be simulated; it stops at
// simulationBudget removals and counts the commands it left unweighed.
func TestDecideStopsAtItsWorkBudget(t *testing.T) {
	c := newCluster()
	var names []string
	for i := range 12 {
		name := fmt.Sprintf("n%02d", i)
		c.node(name, 1000, 1, 900)
		names = append(names, name)
	}
	var repl []Replacement
	for i := range 5 {
		repl = append(repl, replacement(fmt.Sprintf("tiny%d", i), 500, 0.1))
	}
	d := Decide(c.input(t, names, 10, 0, repl...))
	if d.Command != nil {
		t.Fatalf("command %s, want none: no pod fits anywhere", d.Command)
	}
	if d.Simulated > simulationBudget || d.Simulated < simulationBudget-10 || d.Skipped == 0 {
		t.Fatalf("simulated %d removals, skipped %d commands; want the budget (%d) spent and the rest skipped", d.Simulated, d.Skipped, simulationBudget)
	}
	// A small search stays within it and skips nothing.
	d = Decide(c.input(t, names[:3], 3, 0))
	if d.Skipped != 0 || d.Simulated == 0 {
		t.Fatalf("small search: simulated %d, skipped %d; want some work and nothing skipped", d.Simulated, d.Skipped)
	}
}

// The command held for its window stays chosen while it pays, over a
// better one; once it no longer pays, or another is worth more than twice
// as much (or none is held), the best is chosen.
func TestDecideKeepsTheHeldCommand(t *testing.T) {
	c := newCluster()
	c.node("a", 4000, 1.5, 1000)
	c.node("b", 4000, 1, 1000)
	c.node("room", 8000, 1)
	in := c.input(t, []string{"a", "b"}, 1, 0.1)
	in.Cost = CostModel{Horizon: time.Hour, EvictionCost: 0.01}
	best := Plan(in)
	if best == nil || best.Key() != "delete:a" {
		t.Fatalf("best command %v, want delete:a (the dearer node)", best)
	}
	in.Held = "delete:b"
	if got := Plan(in); got == nil || got.Key() != "delete:b" {
		t.Fatalf("with delete:b held, got %v", got)
	}
	in.Cost.EvictionCost = 1.2 // b's saving ($1 an hour) no longer pays; a's does
	if got := Plan(in); got == nil || got.Key() != "delete:a" {
		t.Fatalf("with delete:b held and no longer paying, got %v", got)
	}
	in.Cost.EvictionCost = 0.01
	c.prices["a"] = 2.5 // worth more than twice b
	in.Candidates = c.candidates("a", "b")
	if got := Plan(in); got == nil || got.Key() != "delete:a" {
		t.Fatalf("with delete:b held and delete:a worth 2.5 times as much, got %v", got)
	}
}
