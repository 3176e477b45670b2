package consolidation

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// scenarios is how many random clusters TestPlanInvariants plans on; -short
// runs a tenth.
const scenarios = 10_000

// TestPlanInvariants plans on random clusters (node sizes and prices,
// labels and dedicated taints, pods with selectors, tolerations, local
// storage, no controller, do-not-disrupt and safe-to-evict annotations,
// PodDisruptionBudgets, nodes held by other phases, workloads in their
// cooldown, aborted commands, cluster-wide limits, min sizes and budgets)
// and checks every command against rules stated here, independently of
// the planner's own code:
//   - every pod the command moves is placed, by the scheduler framework, on
//     the nodes that stay plus the replacement, and none it may not move is
//     moved;
//   - no limit is crossed: the replacement fits the maxima beside the nodes
//     it replaces, the removals keep the minimums, no group goes below its
//     min size, no command removes more nodes than the budget;
//   - the bill goes down, by more than the threshold, and the saving over
//     the horizon pays for the disruption;
//   - no node held by another phase, holding a pod of a workload in its
//     cooldown, or of a command backed off, is acted on;
//   - the replacement carries the removed nodes' taints.
func TestPlanInvariants(t *testing.T) {
	n := scenarios
	if testing.Short() {
		n /= 10
	}
	checker := sdtest.Checker(t)
	commands := map[Kind]int{}
	for seed := range n {
		sc := newScenario(uint64(seed))
		d := Decide(sc.input(checker))
		if d.Command == nil {
			commands[""]++
			continue
		}
		commands[d.Command.Kind]++
		if why := sc.violation(checker, d.Command); why != "" {
			t.Fatalf("seed %d: %s: %s\n%s", seed, d.Command, why, sc)
		}
	}
	t.Logf("%d scenarios: %d deletes, %d replaces, %d without a command", n, commands[Delete], commands[Replace], commands[""])
	if commands[Delete] == 0 || commands[Replace] == 0 {
		t.Errorf("the scenarios never led to both kinds of command (%v): they test too little", commands)
	}
}

type scenario struct {
	rng        *rand.Rand
	nodes      []*apiv1.Node
	pods       []*apiv1.Pod
	pdbs       []*policyv1.PodDisruptionBudget
	prices     map[string]float64
	groups     map[string]string
	removable  map[string]int
	held       map[string]string
	cooling    map[string]bool // workloads in their cooldown
	backedOff  map[string]bool
	repl       []Replacement
	limits     resourcequotas.Limits
	maxNodes   int
	threshold  float64
	cost       CostModel
	candidates []Candidate
}

var sizes = []struct {
	slug  string
	milli int64
}{{"s-1vcpu", 1000}, {"s-2vcpu", 2000}, {"s-4vcpu", 4000}, {"s-8vcpu", 8000}}

func newScenario(seed uint64) *scenario {
	rng := rand.New(rand.NewPCG(seed, 40))
	sc := &scenario{rng: rng, prices: map[string]float64{}, groups: map[string]string{}, removable: map[string]int{},
		held: map[string]string{}, cooling: map[string]bool{}, backedOff: map[string]bool{}}
	// Prices near DigitalOcean's: about $0.009 per cpu-hour, with a
	// discount or a premium per node.
	price := func(milli int64) float64 { return float64(milli) / 1000 * 0.009 * (0.8 + 0.4*rng.Float64()) }
	for i := range 2 + rng.IntN(5) {
		sz := sizes[rng.IntN(len(sizes))]
		n := test.BuildNode(fmt.Sprintf("n%d", i), sz.milli, sz.milli*2*test.MiB)
		n.Labels[apiv1.LabelInstanceTypeStable] = sz.slug
		if rng.IntN(3) == 0 {
			n.Labels["zone"] = "a"
		}
		if rng.IntN(6) == 0 {
			n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "db", Effect: apiv1.TaintEffectNoSchedule}}
		}
		sc.nodes = append(sc.nodes, n)
		sc.prices[n.Name] = price(sz.milli)
		sc.groups[n.Name] = fmt.Sprintf("g%d", rng.IntN(2))
		if rng.IntN(8) == 0 {
			sc.held[n.Name] = "scale-down"
		}
		sc.fill(n)
	}
	for _, g := range []string{"g0", "g1"} {
		sc.removable[g] = rng.IntN(4)
	}
	if rng.IntN(3) == 0 {
		allowed := int32(rng.IntN(2))
		sc.pdbs = append(sc.pdbs, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: "default"},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app-1"}}, MaxUnavailable: ptrTo(intstr.FromInt32(1))},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
		})
	}
	for i := range 1 + rng.IntN(3) {
		sz := sizes[rng.IntN(len(sizes))]
		r := replacement(sz.slug, sz.milli, price(sz.milli))
		r.Size = fmt.Sprintf("%s-%d", sz.slug, i)
		r.Room = rng.IntN(3)
		if rng.IntN(4) == 0 {
			r.Template.Node().Labels["zone"] = "a"
		}
		if rng.IntN(4) == 0 {
			r.Template.Node().Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "db", Effect: apiv1.TaintEffectNoSchedule}}
		}
		sc.repl = append(sc.repl, r)
	}
	slices.SortStableFunc(sc.repl, func(a, b Replacement) int {
		switch {
		case a.Price < b.Price:
			return -1
		case a.Price > b.Price:
			return 1
		}
		return 0
	})
	var cpu, mem int64
	for _, n := range sc.nodes {
		cpu += n.Status.Allocatable.Cpu().MilliValue()
		mem += n.Status.Allocatable.Memory().Value()
	}
	if rng.IntN(3) == 0 {
		sc.limits.MaxNodes = len(sc.nodes) + rng.IntN(2)
	}
	if rng.IntN(3) == 0 {
		sc.limits.MaxMilliCPU = cpu + int64(rng.IntN(4))*1000
	}
	if rng.IntN(3) == 0 {
		sc.limits.MinMilliCPU = cpu - int64(rng.IntN(8))*1000
	}
	if rng.IntN(4) == 0 {
		sc.limits.MinMemory = mem - int64(rng.IntN(8))*1000*test.MiB
	}
	sc.maxNodes = 1 + rng.IntN(3)
	sc.threshold = []float64{0, 0.1, 0.3}[rng.IntN(3)]
	sc.cost = CostModel{Horizon: time.Duration(1+rng.IntN(120)) * time.Minute, EvictionCost: []float64{0, 0.0005, 0.005, 0.05}[rng.IntN(4)]}
	return sc
}

func ptrTo[T any](v T) *T { return &v }

// fill puts random pods on n, within its allocatable.
func (sc *scenario) fill(n *apiv1.Node) {
	rng := sc.rng
	free := n.Status.Allocatable.Cpu().MilliValue()
	for i := 0; i < 4 && free > 100; i++ {
		milli := min(free, int64(100+rng.IntN(2500)))
		free -= milli
		app := fmt.Sprintf("app-%d", rng.IntN(4))
		p := test.BuildScheduledPod(fmt.Sprintf("%s-p%d", n.Name, i), milli, milli*test.MiB, "rs-"+app, n.Name)
		p.Labels = map[string]string{"app": app}
		switch rng.IntN(30) {
		case 0:
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
		case 1:
			p.Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpExists}}
		case 2:
			p.Spec.Volumes = []apiv1.Volume{{Name: "scratch", VolumeSource: apiv1.VolumeSource{EmptyDir: &apiv1.EmptyDirVolumeSource{}}}}
		case 3:
			p.OwnerReferences = nil
		case 4:
			p.Annotations = map[string]string{drain.DoNotDisruptKey: "true"}
		case 5:
			p.Annotations = map[string]string{drain.SafeToEvictKey: "false"}
		case 6:
			sc.cooling["default/ReplicaSet/rs-"+app] = true
		}
		if len(n.Spec.Taints) > 0 && rng.IntN(2) == 0 {
			p.Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpExists}}
		}
		sc.pods = append(sc.pods, p)
	}
}

func (sc *scenario) byNode() map[string][]*apiv1.Pod {
	out := map[string][]*apiv1.Pod{}
	for _, p := range sc.pods {
		out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
	}
	return out
}

func (sc *scenario) input(checker *simulator.PredicateChecker) Input {
	snap := simulator.NewClusterSnapshot()
	var live []*apiv1.Node
	for _, n := range sc.nodes {
		if sc.held[n.Name] == "" {
			live = append(live, n)
		}
	}
	if err := snap.SetClusterState(live, sc.pods); err != nil {
		panic(err)
	}
	sc.candidates, _, _ = Candidates(CandidateInput{
		Nodes: sc.nodes, PodsByNode: sc.byNode(), Held: sc.held,
		GroupOf: func(n string) (Group, bool) { return Group{ID: sc.groups[n], Consolidate: true}, true },
		Ready:   func(*apiv1.Node) bool { return true },
		Price:   func(n *apiv1.Node) (float64, error) { return sc.prices[n.Name], nil },
		Moved: func(p *apiv1.Pod) bool {
			w, _ := Workload(p)
			return sc.cooling[w]
		},
	})
	// Back off the first command a plan without backoffs would choose, one
	// scenario in four.
	in := Input{
		Snapshot: snap, Checker: checker, DrainOptions: sdtest.DrainOptions(sdtest.Options()), PDBs: sc.pdbs,
		Candidates: sc.candidates, Replacements: sc.repl, Removable: sc.removable, Quotas: sc.quotas(),
		Threshold: sc.threshold, Cost: sc.cost, MaxNodes: sc.maxNodes, Now: sdtest.T0,
	}
	if sc.rng.IntN(4) == 0 {
		if c := Decide(in).Command; c != nil {
			sc.backedOff[c.Key()] = true
		}
	}
	in.BackedOff = func(k string) bool { return sc.backedOff[k] }
	return in
}

func (sc *scenario) quotas() *resourcequotas.Tracker {
	beingDeleted := map[string]bool{}
	for n := range sc.held {
		beingDeleted[n] = true
	}
	q := resourcequotas.NewTracker(sc.limits, sc.nodes, beingDeleted)
	return &q
}

// violation checks cmd against the rules of TestPlanInvariants.
func (sc *scenario) violation(checker *simulator.PredicateChecker, cmd *Command) string {
	byNode := sc.byNode()
	removed := map[string]bool{}
	perGroup := map[string]int{}
	q := *sc.quotas()
	var moved []*apiv1.Pod
	price := 0.0
	for _, c := range cmd.Remove {
		name := c.Node.Name
		if removed[name] {
			return "a node removed twice"
		}
		removed[name] = true
		if sc.held[name] != "" {
			return name + " is held by " + sc.held[name]
		}
		perGroup[sc.groups[name]]++
		if perGroup[sc.groups[name]] > sc.removable[sc.groups[name]] {
			return "group " + sc.groups[name] + " goes below its min size"
		}
		if r := q.CheckRemoval(c.Node); r != "" {
			return "the cluster goes below its " + string(r) + " minimum"
		}
		q.Remove(c.Node)
		price += sc.prices[name]
		for _, p := range byNode[name] {
			if why := sc.unmovable(p); why != "" {
				return fmt.Sprintf("pod %s is moved though %s", p.Name, why)
			}
			moved = append(moved, p)
		}
	}
	if len(cmd.Remove) > sc.maxNodes {
		return fmt.Sprintf("%d nodes removed, budget %d", len(cmd.Remove), sc.maxNodes)
	}
	if sc.backedOff[cmd.Key()] {
		return "a backed-off command acts"
	}
	after := price
	var added *apiv1.Node
	if cmd.Kind == Replace {
		r := cmd.Replacement
		after = price - r.Price
		if r.Room < 1 {
			return "a replacement from a group at its max size"
		}
		added = r.Template.Node()
		full := *sc.quotas()
		if room, res := full.Room(added, 1); room < 1 {
			return "the replacement crosses the " + string(res) + " maximum"
		}
		for _, c := range cmd.Remove {
			for _, taint := range c.Node.Spec.Taints {
				if !slices.ContainsFunc(added.Spec.Taints, func(h apiv1.Taint) bool { return h.MatchTaint(&taint) }) {
					return "the replacement lacks taint " + taint.Key
				}
			}
		}
	}
	if after <= 0 || after <= sc.threshold*price || cmd.Saving-after > 1e-9 || after-cmd.Saving > 1e-9 {
		return fmt.Sprintf("the bill goes down by %.5f (command says %.5f) of %.5f", after, cmd.Saving, price)
	}
	if a := sc.cost.Appraise(cmd); !a.Pays() {
		return "the saving does not pay: " + a.String()
	}
	// Every moved pod is placed on the nodes that stay and the
	// replacement, in a snapshot built here.
	var stay []*apiv1.Node
	var staying []*apiv1.Pod
	for _, n := range sc.nodes {
		if !removed[n.Name] && sc.held[n.Name] == "" {
			stay = append(stay, n)
			staying = append(staying, byNode[n.Name]...)
		}
	}
	if added != nil {
		n := added.DeepCopy()
		n.Name = "replacement"
		stay = append(stay, n)
	}
	snap := simulator.NewClusterSnapshot()
	if err := snap.SetClusterState(stay, staying); err != nil {
		return err.Error()
	}
	var again []*apiv1.Pod
	for _, p := range moved {
		c := p.DeepCopy()
		c.Spec.NodeName = ""
		again = append(again, c)
	}
	if _, left, err := simulator.TrySchedulePods(checker, snap, again); err != nil || len(left) > 0 {
		return fmt.Sprintf("%d moved pod(s) find no place (%v)", len(left), err)
	}
	return ""
}

// unmovable says why the drain may not evict p ("" if it may).
func (sc *scenario) unmovable(p *apiv1.Pod) string {
	switch {
	case len(p.Spec.Volumes) > 0:
		return "it uses local storage"
	case len(p.OwnerReferences) == 0:
		return "it has no controller"
	case p.Annotations[drain.DoNotDisruptKey] == "true":
		return "it is marked do-not-disrupt"
	case p.Annotations[drain.SafeToEvictKey] == "false":
		return "it is not safe to evict"
	}
	if w, _ := Workload(p); sc.cooling[w] {
		return "its workload is in its cooldown"
	}
	for _, pdb := range sc.pdbs {
		if pdb.Spec.Selector.MatchLabels["app"] == p.Labels["app"] && pdb.Status.DisruptionsAllowed == 0 {
			return "its PodDisruptionBudget allows no disruption"
		}
	}
	return ""
}

// String shows the scenario for a failure.
func (sc *scenario) String() string {
	s := ""
	for _, n := range sc.nodes {
		s += fmt.Sprintf("node %s %s %dm $%.4f group %s held %q taints %v labels zone=%s\n", n.Name, n.Labels[apiv1.LabelInstanceTypeStable],
			n.Status.Allocatable.Cpu().MilliValue(), sc.prices[n.Name], sc.groups[n.Name], sc.held[n.Name], n.Spec.Taints, n.Labels["zone"])
		for _, p := range sc.byNode()[n.Name] {
			s += fmt.Sprintf("  pod %s %dm app %s selector %v tolerations %d volumes %d annotations %v\n", p.Name,
				p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(), p.Labels["app"], p.Spec.NodeSelector, len(p.Spec.Tolerations), len(p.Spec.Volumes), p.Annotations)
		}
	}
	for _, r := range sc.repl {
		s += fmt.Sprintf("replacement %s $%.4f room %d taints %v\n", r.Size, r.Price, r.Room, r.Template.Node().Spec.Taints)
	}
	return s + fmt.Sprintf("limits %+v budget %d threshold %v cost %+v removable %v", sc.limits, sc.maxNodes, sc.threshold, sc.cost, sc.removable)
}
