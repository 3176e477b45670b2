package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// Consolidation scenarios (issue 34). Each starts from one pool of c-4 nodes (CPU-
// optimized, $84 a month), each node running one 2000m pod: 51 % used, above the
// scale-down utilization threshold, and no two such pods fit one node, so scale-down
// removes nothing. One fits an s-4vcpu-8gb ($48 a month against $84); two or three fit
// one s-8vcpu-16gb (against 2 or 3 × $84): only consolidation, replacing nodes by a size
// it creates, makes the cluster cheaper.
const (
	consolidateTag = "k8s-cluster-autoscaler-consolidate"
	// wideSize is the size the scenarios start on; tallSize the one that replaces three.
	wideSize, tallSize = "c-4", "s-8vcpu-16gb"
	halfWide           = "2000m"
	doNotDisrupt       = "karpenter.sh/do-not-disrupt"
	safeToEvict        = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	scaleDownDisabled  = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// consolidationTimeout bounds a whole consolidation: a stabilization window, a pool
	// created, its node booted and Ready, the pods evicted and rescheduled, the old
	// nodes deleted.
	consolidationTimeout = 4 * time.Minute
)

// widePool is a consolidatable pool of n wide nodes that may shrink to zero.
func widePool(n int) doks.PoolSpec {
	return doks.PoolSpec{Name: "wide", Size: wideSize, Count: n, AutoScale: true, MinNodes: 0, MaxNodes: n,
		Tags: []string{consolidateTag}}
}

// consolidationArgs: pools on demand of the two sizes, consolidation on (unless off),
// a short stabilization window, a budget that lets three nodes go at once (the
// default, 1, allows only single-node commands), and a workload cooldown scaled down
// like the window (a Deployment spread over three nodes may take three commands).
func (s *scenario) consolidationArgs(on bool) []string {
	args := []string{napFlag, "--cloud-config=" + s.napConfig("", "s-4vcpu-8gb", tallSize),
		"--consolidation-stabilization-window=5s", "--consolidation-max-disrupted-nodes=3", "--consolidation-workload-cooldown=10s"}
	if on {
		args = append(args, "--consolidation-enabled")
	}
	return args
}

// podLog records, from a watch on the scenario's namespace, every pod the scheduler
// found no node for and every pod deleted, so a test can say what happened between
// its polls.
type podLog struct {
	mu            sync.Mutex
	unschedulable map[string]string // pod name → the scheduler's message
	deleted       map[string]bool   // pod UID
}

func (s *scenario) watchPodLog() *podLog {
	l := &podLog{unschedulable: map[string]string{}, deleted: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(s.kube, 0, informers.WithNamespace(s.ns))
	inf := factory.Core().V1().Pods().Informer()
	see := func(obj any) {
		p, ok := obj.(*apiv1.Pod)
		if !ok {
			return
		}
		for _, c := range p.Status.Conditions {
			if c.Type == apiv1.PodScheduled && c.Status == apiv1.ConditionFalse && c.Reason == apiv1.PodReasonUnschedulable {
				l.mu.Lock()
				l.unschedulable[p.Name] = c.Message
				l.mu.Unlock()
			}
		}
		if p.DeletionTimestamp != nil {
			l.mu.Lock()
			l.deleted[string(p.UID)] = true
			l.mu.Unlock()
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: see, UpdateFunc: func(_, n any) { see(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*apiv1.Pod); ok {
				l.mu.Lock()
				l.deleted[string(p.UID)] = true
				l.mu.Unlock()
			}
		},
	})
	ctx, cancel := context.WithCancel(s.ctx)
	s.t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return l
}

// noPodWithoutNode fails the test if the scheduler ever found no node for a pod: a pod
// moved by consolidation must find its replacement node Ready.
func (l *podLog) noPodWithoutNode(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, msg := range l.unschedulable {
		t.Errorf("pod %s was left without a node: %s", name, msg)
	}
}

// wasDeleted reports whether the pod was deleted (evicted) since the log started.
func (l *podLog) wasDeleted(uid string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deleted[uid]
}

// seenNodes remembers, per scenario, every node name its simulator listed, so that
// events on nodes of an earlier scenario (aggregated, their time renewed) are told apart.
var seenNodes sync.Map // *scenario → map[string]bool

func (s *scenario) ownNodes() map[string]bool {
	v, _ := seenNodes.LoadOrStore(s, map[string]bool{})
	own := v.(map[string]bool)
	for _, p := range s.sb.DOKS.Pools() {
		for _, n := range p.Nodes {
			own[n.Name] = true
		}
	}
	return own
}

// consolidationEvents are the events of reason recorded since the test began on this
// scenario's objects: its nodes, or objects in its namespace.
func (s *scenario) consolidationEvents(reason string, since time.Time) []apiv1.Event {
	s.t.Helper()
	l, err := s.kube.CoreV1().Events("").List(s.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", reason).String(),
	})
	if err != nil {
		s.t.Fatal(err)
	}
	own := s.ownNodes()
	var out []apiv1.Event
	for _, e := range l.Items {
		mine := e.InvolvedObject.Namespace == s.ns || (e.InvolvedObject.Kind == "Node" && own[e.InvolvedObject.Name])
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		if mine && !at.Before(since.Truncate(time.Second)) {
			out = append(out, e)
		}
	}
	return out
}

func (s *scenario) waitConsolidationEvent(reason string, since time.Time, timeout time.Duration) apiv1.Event {
	s.t.Helper()
	var ev apiv1.Event
	s.eventually("an event "+reason, timeout, func() error {
		evs := s.consolidationEvents(reason, since)
		if len(evs) == 0 {
			return fmt.Errorf("none yet")
		}
		ev = evs[0]
		return nil
	})
	s.t.Logf("%s: %s/%s: %s", reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
	return ev
}

// noConsolidationEvents checks that none of the consolidation events was recorded since.
func (s *scenario) noConsolidationEvents(since time.Time) error {
	for _, reason := range []string{"ConsolidationPlanned", "Consolidated", "ConsolidationAborted"} {
		if evs := s.consolidationEvents(reason, since); len(evs) > 0 {
			return fmt.Errorf("event %s: %s", reason, evs[0].Message)
		}
	}
	return nil
}

// hourlyPrice is the catalogue price of every node DigitalOcean lists.
func (s *scenario) hourlyPrice() float64 {
	total := 0.0
	for _, p := range s.sb.DOKS.Pools() {
		price, ok := doks.SizePrice(p.Size)
		if !ok {
			s.t.Fatalf("no price for %s", p.Size)
		}
		total += price * float64(len(p.Nodes))
	}
	return total
}

// listedNodes counts the nodes DigitalOcean lists, by size.
func (s *scenario) listedNodes() map[string]int {
	out := map[string]int{}
	for _, p := range s.sb.DOKS.Pools() {
		out[p.Size] += len(p.Nodes)
	}
	return out
}

// nodeExists says whether a Node of that name is registered.
func (s *scenario) nodeExists(name string) bool {
	_, err := s.kube.CoreV1().Nodes().Get(s.ctx, name, metav1.GetOptions{})
	return err == nil
}

// annotateNode sets an annotation on a Node.
func (s *scenario) annotateNode(name, k, v string) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.kube.CoreV1().Nodes().Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
		_, err = s.kube.CoreV1().Nodes().Update(s.ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// apiCreatedPools counts the pools created through the API so far, gone ones included.
func (s *scenario) apiCreatedPools() int {
	n := 0
	for _, l := range s.sb.DOKS.PoolHistory() {
		if l.ByAPI {
			n++
		}
	}
	return n
}

// (a) Three wide nodes half used end on fewer, cheaper nodes; no pod waits for a node.
func TestConsolidationReplacesHalfEmptyNodesByACheaperOne(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{widePool(3)}})
	since := time.Now()
	s.deploy("app", 3, halfWide)
	s.waitRunning("app", 3, 60*time.Second)
	before := s.hourlyPrice()
	log := s.watchPodLog()

	s.startAutoscaler(s.consolidationArgs(true)...)
	s.waitConsolidationEvent("ConsolidationPlanned", since, consolidationTimeout)
	s.waitConsolidationEvent("Consolidated", since, consolidationTimeout)
	s.eventually("the wide nodes replaced by fewer, cheaper ones", consolidationTimeout, func() error {
		nodes := s.listedNodes()
		total := 0
		for _, n := range nodes {
			total += n
		}
		if nodes[wideSize] != 0 || total >= 3 || s.hourlyPrice() >= before {
			return fmt.Errorf("nodes %v at $%.4f an hour (before: 3 × %s at $%.4f)", nodes, s.hourlyPrice(), wideSize, before)
		}
		return s.runningAre("app", 3)()
	})
	log.noPodWithoutNode(t)
}

// guardedStart runs the wide pool with free pods that consolidation may move and
// guarded ones it may not, and returns each guarded pod's UID and node once all run.
func guardedStart(t *testing.T, nodes int, deploy func(s *scenario)) (*scenario, map[string]string, *podLog, time.Time) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{widePool(nodes)}})
	since := time.Now()
	deploy(s)
	s.eventually("every pod running, one a node", 90*time.Second, func() error {
		l, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range l.Items {
			if isReady(&p) {
				ready++
			}
		}
		if ready != nodes || len(l.Items) != nodes {
			return fmt.Errorf("%d of %d pods running", ready, len(l.Items))
		}
		return nil
	})
	return s, map[string]string{}, s.watchPodLog(), since
}

// guard notes the pods of app: their UIDs and nodes must stay.
func (s *scenario) guard(guarded map[string]string, app string) {
	for _, p := range s.pods(app) {
		guarded[string(p.UID)] = p.Spec.NodeName
	}
}

// guardedStayed checks that no guarded pod was evicted and that their nodes stay,
// untainted, after consolidation moved the free pods.
func (s *scenario) guardedStayed(guarded map[string]string, log *podLog) {
	s.t.Helper()
	if len(guarded) == 0 {
		s.t.Fatal("no guarded pod")
	}
	tainted := s.taintedNodes()
	for uid, node := range guarded {
		if log.wasDeleted(uid) {
			s.t.Errorf("guarded pod %s on %s was evicted", uid, node)
		}
		if !s.nodeExists(node) || slices.Contains(tainted, node) {
			s.t.Errorf("guarded pod's node %s removed or tainted for removal", node)
		}
	}
}

// waitOnlyGuardedLeft waits until the free pods all run and no wide node is left but
// the guarded ones: consolidation moved everything it may, however it chose to.
func (s *scenario) waitOnlyGuardedLeft(guarded map[string]string, free string, replicas int) {
	s.t.Helper()
	nodes := map[string]bool{}
	for _, n := range guarded {
		nodes[n] = true
	}
	s.eventually(fmt.Sprintf("only the %d guarded %s nodes left", len(nodes), wideSize), consolidationTimeout, func() error {
		if got := s.listedNodes(); got[wideSize] != len(nodes) {
			return fmt.Errorf("nodes %v", got)
		}
		return s.runningAre(free, replicas)()
	})
}

// (b) Pods marked not to be disrupted (Karpenter's annotation, upstream's safe-to-evict
// "false") and a node marked scale-down-disabled stay while consolidation moves the
// others.
func TestConsolidationLeavesPodsAndNodesMarkedNotToDisrupt(t *testing.T) {
	var marked string
	s, guarded, log, since := guardedStart(t, 6, func(s *scenario) {
		s.deploy("karpenter", 1, halfWide, withPodAnnotation(doNotDisrupt, "true"))
		s.deploy("pinned", 1, halfWide, withPodAnnotation(safeToEvict, "false"))
		s.waitRunning("karpenter", 1, 60*time.Second)
		s.waitRunning("pinned", 1, 60*time.Second)
		taken := map[string]bool{s.pods("karpenter")[0].Spec.NodeName: true, s.pods("pinned")[0].Spec.NodeName: true}
		for _, n := range s.poolNodes("wide") {
			if !taken[n.Name] {
				marked = n.Name
				break
			}
		}
		s.annotateNode(marked, scaleDownDisabled, "true")
		s.deploy("free", 4, halfWide)
	})
	s.guard(guarded, "karpenter")
	s.guard(guarded, "pinned")
	for _, p := range s.pods("free") {
		if p.Spec.NodeName == marked {
			guarded[string(p.UID)] = marked
		}
	}
	if len(guarded) != 3 {
		t.Fatalf("want 3 guarded pods (one on the scale-down-disabled node), got %d", len(guarded))
	}

	s.startAutoscaler(s.consolidationArgs(true)...)
	s.waitConsolidationEvent("Consolidated", since, consolidationTimeout)
	s.waitOnlyGuardedLeft(guarded, "free", 4)
	s.guardedStayed(guarded, log)
	log.noPodWithoutNode(t)
}

// (c) A PDB allowing no disruption keeps its pods and their nodes; the others move.
func TestConsolidationKeepsPodsWhosePDBAllowsNoDisruption(t *testing.T) {
	s, guarded, log, since := guardedStart(t, 6, func(s *scenario) {
		s.deploy("held", 3, halfWide)
		s.pdb("held", "held", 0)
		s.deploy("free", 3, halfWide)
	})
	s.guard(guarded, "held")

	s.startAutoscaler(s.consolidationArgs(true)...)
	s.waitConsolidationEvent("Consolidated", since, consolidationTimeout)
	s.waitOnlyGuardedLeft(guarded, "free", 3)
	s.guardedStayed(guarded, log)
	if err := s.runningAre("held", 3)(); err != nil {
		t.Error(err)
	}
	log.noPodWithoutNode(t)
}

// (d) A replacement whose pool cannot be created: nothing is evicted, the old nodes
// are untainted, ConsolidationAborted is recorded.
func TestConsolidationReplacementCreateRefused(t *testing.T) {
	replacementCreateFails(t, doks.Fault{Operation: doks.OpCreateNodePool, Status: 422,
		Message: "size is not available in this region (injected)"}, false)
}

// (d) A replacement whose create was applied but answered 504: the autoscaler finds
// the pool by listing and creates no second one for the command.
func TestConsolidationReplacementCreateAnswerLost(t *testing.T) {
	replacementCreateFails(t, doks.Fault{Operation: doks.OpCreateNodePool, Status: 504, Applied: true, Times: 1}, true)
}

// replacementCreateFails runs three wide nodes with the fault on pool creation; lost
// says the create was applied (the pool exists, its answer was lost).
func replacementCreateFails(t *testing.T, fault doks.Fault, lost bool) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{widePool(3)}})
	since := time.Now()
	s.deploy("app", 3, halfWide)
	s.waitRunning("app", 3, 60*time.Second)
	var uids []string
	for _, p := range s.pods("app") {
		uids = append(uids, string(p.UID))
	}
	log := s.watchPodLog()
	s.sb.DOKS.InjectFault(fault)

	s.startAutoscaler(s.consolidationArgs(true)...)
	if !lost {
		s.waitConsolidationEvent("ConsolidationAborted", since, consolidationTimeout)
		if err := s.runningAre("app", 3)(); err != nil {
			t.Error(err)
		}
		for _, uid := range uids {
			if log.wasDeleted(uid) {
				t.Errorf("pod %s evicted though its replacement was never created", uid)
			}
		}
		if got := s.listedNodes()[wideSize]; got != 3 {
			t.Errorf("%d wide nodes listed after the abort, want all 3", got)
		}
		// The rollback may take a loop: every old node untainted.
		s.eventually("the old nodes untainted", 30*time.Second, func() error {
			if tainted := s.taintedNodes(); len(tainted) > 0 {
				return fmt.Errorf("tainted: %v", tainted)
			}
			return nil
		})
		if n := s.apiCreatedPools(); n != 0 {
			t.Errorf("%d pools created though every create was refused", n)
		}
		log.noPodWithoutNode(t)
		return
	}

	// The pool was created; the autoscaler must find it by listing rather than create
	// another, whatever it then does with the command.
	var outcome string
	s.eventually("Consolidated or ConsolidationAborted", consolidationTimeout, func() error {
		for _, reason := range []string{"Consolidated", "ConsolidationAborted"} {
			if len(s.consolidationEvents(reason, since)) > 0 {
				outcome = reason
				return nil
			}
		}
		return fmt.Errorf("neither yet")
	})
	t.Logf("after the lost 201: %s", outcome)
	if n := s.apiCreatedPools(); n != 1 {
		t.Errorf("%d pools created for one command whose create was applied once, want 1: %v", n, poolNames(s.sb.DOKS.PoolHistory()))
	}
	if outcome == "ConsolidationAborted" {
		s.eventually("the old nodes untainted", 30*time.Second, func() error {
			if tainted := s.taintedNodes(); len(tainted) > 0 {
				return fmt.Errorf("tainted: %v", tainted)
			}
			return nil
		})
	}
	s.eventually("every app pod running", consolidationTimeout, s.runningAre("app", 3))
	log.noPodWithoutNode(t)
}

func poolNames(h []doks.PoolLife) []string {
	var out []string
	for _, l := range h {
		if l.ByAPI {
			out = append(out, l.Name)
		}
	}
	sort.Strings(out)
	return out
}

// (e) Without --consolidation-enabled nothing is consolidated, even on a tagged pool
// with a short stabilization window.
func TestConsolidationOffByDefault(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{widePool(3)}})
	since := time.Now()
	s.deploy("app", 3, halfWide)
	s.waitRunning("app", 3, 60*time.Second)
	uids := map[string]bool{}
	for _, p := range s.pods("app") {
		uids[string(p.UID)] = true
	}
	ca := s.startAutoscaler(s.consolidationArgs(false)...)
	// Long beyond the 5s window and several loops; with consolidation on, the
	// replacement would be planned within it.
	s.holds("no consolidation", 45*time.Second, func() error {
		if nodes := s.listedNodes(); nodes[wideSize] != 3 || len(s.createdPools()) != 0 {
			return fmt.Errorf("nodes %v, created pools %d", nodes, len(s.createdPools()))
		}
		for _, p := range s.pods("app") {
			if !uids[string(p.UID)] {
				return fmt.Errorf("pod %s is new: one was moved", p.Name)
			}
		}
		return s.noConsolidationEvents(since)
	})
	if !ca.Running() {
		t.Fatalf("the autoscaler exited: %v", ca.Err())
	}
	if n := s.metric(ca, "cluster_autoscaler_consolidation_commands_total", nil); n != 0 {
		t.Errorf("%v consolidation commands counted with consolidation off", n)
	}
}
