package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// Sizing used throughout: an s-2vcpu-4gb node has 1900m allocatable CPU, so a pod asking
// for 1500m needs a node of its own, and pods asking for 200m pack many to a node.
const (
	size     = "s-2vcpu-4gb"
	bigPod   = "1500m"
	smallPod = "200m"
)

func autoscaled(name string, count, min, max int) doks.PoolSpec {
	return doks.PoolSpec{Name: name, Size: size, Count: count, AutoScale: true, MinNodes: min, MaxNodes: max}
}

// 1. A pool at zero nodes grows from its template for pods that fit nowhere.
func TestScaleFromZero(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("zero", 0, 0, 3)}})
	s.startAutoscaler()
	// Selecting the region, as manifests shared across regions do: the
	// template must carry the region label real DOKS nodes have.
	s.deploy("web", 2, bigPod, withNodeSelector(apiv1.LabelTopologyRegion, sandbox.DefaultRegion))
	s.waitTarget("zero", 2, 60*time.Second)
	s.waitNodes("zero", 2, 60*time.Second)
	s.waitRunning("web", 2, 60*time.Second)
	if ev := s.events("TriggeredScaleUp"); len(ev) == 0 {
		t.Error("no TriggeredScaleUp event on the pending pods")
	}
	s.holds("target 2", 3*time.Second, s.targetIs("zero", 2))
	if m := s.maxTarget("zero"); m != 2 {
		t.Errorf("pool reached %d nodes on the way, want 2 at most", m)
	}
}

// 2. Pending pods get exactly as many nodes as they need, in one go, no more.
func TestScaleUpToExactlyNeeded(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{
		autoscaled("exact", 1, 1, 10),
		{Name: "fixed", Size: "s-1vcpu-2gb", Count: 1}, // not autoscaled: must be left alone
	}})
	ca := s.startAutoscaler()
	// The existing empty node takes one pod; four more nodes are needed.
	s.deploy("web", 5, bigPod, withNodeSelector(nodeagent.LabelNodePool, "exact"))
	s.waitTarget("exact", 5, 60*time.Second)
	s.waitRunning("web", 5, 90*time.Second)
	s.holds("target 5", 4*time.Second, s.targetIs("exact", 5))
	if m := s.maxTarget("exact"); m != 5 {
		t.Errorf("pool reached %d nodes, want exactly 5", m)
	}
	if got := s.pool("fixed").Count; got != 1 {
		t.Errorf("the pool without autoscaling changed to %d nodes", got)
	}
	// What an operator's dashboard shows of it.
	if n := s.metric(ca, "cluster_autoscaler_scaled_up_nodes_total", nil); n != 4 {
		t.Errorf("scaled_up_nodes_total = %v, want 4", n)
	}
	if n := s.metric(ca, "cluster_autoscaler_failed_scale_ups_total", nil); n != 0 {
		t.Errorf("failed_scale_ups_total = %v, want 0", n)
	}
	// DigitalOcean answers a pool update with 202 Accepted.
	if n := s.metric(ca, "cluster_autoscaler_digitalocean_api_requests_total", map[string]string{"operation": "UpdateNodePool", "code": "202"}); n < 1 {
		t.Errorf("digitalocean_api_requests_total{UpdateNodePool,202} = %v, want at least 1", n)
	}
	if code, body := s.get(ca, "/health-check"); code != http.StatusOK {
		t.Errorf("/health-check answered %d: %s", code, body)
	}
}

// 3. The pool's max is a hard ceiling: extra pods stay pending and say why.
func TestMaxRespected(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("capped", 1, 1, 3)}})
	s.startAutoscaler()
	s.deploy("web", 5, bigPod)
	s.waitTarget("capped", 3, 60*time.Second)
	s.waitNodes("capped", 3, 60*time.Second)
	ev := s.waitEvent("NotTriggerScaleUp", 60*time.Second)
	t.Logf("NotTriggerScaleUp: %s", ev.Message)
	s.holds("target 3 at max", 5*time.Second, s.targetIs("capped", 3))
	if m := s.maxTarget("capped"); m > 3 {
		t.Errorf("pool reached %d nodes, above its max of 3", m)
	}
	running, pending := 0, 0
	for _, p := range s.pods("web") {
		if isReady(&p) {
			running++
		} else {
			pending++
		}
	}
	if running != 3 || pending != 2 {
		t.Errorf("%d pods running and %d pending, want 3 and 2", running, pending)
	}
}

// 4. Unneeded nodes go after --scale-down-unneeded-time, but never below min.
func TestScaleDownRespectsMin(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("shrink", 5, 2, 5)}})
	s.deploy("web", 1, smallPod)
	s.waitRunning("web", 1, 30*time.Second)
	start := time.Now()
	s.startAutoscaler()
	// While they wait for --scale-down-unneeded-time, unneeded nodes carry
	// upstream's soft taint (--max-bulk-soft-taint-count), which steers new
	// pods elsewhere.
	s.eventually("unneeded nodes soft-tainted PreferNoSchedule", 30*time.Second, func() error {
		if n := softTainted(s, "shrink"); n == 0 {
			return fmt.Errorf("no node of pool shrink carries DeletionCandidateOfClusterAutoscaler:PreferNoSchedule")
		}
		return nil
	})
	s.waitTarget("shrink", 2, 90*time.Second)
	s.waitNodes("shrink", 2, 60*time.Second)
	t.Logf("pool shrank 5 → 2 in %v", time.Since(start).Round(time.Second))
	// At min they are no longer candidates: the soft taint comes off.
	s.eventually("the soft taint off the nodes kept at min", 10*time.Second, func() error {
		if n := softTainted(s, "shrink"); n > 0 {
			return fmt.Errorf("%d node(s) of pool shrink still soft-tainted", n)
		}
		return nil
	})
	s.holds("min of 2 nodes", 8*time.Second, func() error {
		if err := s.targetIs("shrink", 2)(); err != nil {
			return err
		}
		return s.nodesAre("shrink", 2)()
	})
	s.waitRunning("web", 1, 30*time.Second)
}

// softTainted counts the pool's nodes carrying DeletionCandidateOfClusterAutoscaler:PreferNoSchedule.
func softTainted(s *scenario, pool string) int {
	l, err := s.kube.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{LabelSelector: nodeagent.LabelNodePool + "=" + pool})
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, node := range l.Items {
		for _, tt := range node.Spec.Taints {
			if tt.Key == "DeletionCandidateOfClusterAutoscaler" && tt.Effect == apiv1.TaintEffectPreferNoSchedule {
				n++
			}
		}
	}
	return n
}

// 5. A PodDisruptionBudget that allows no disruption, and a pod marked
// safe-to-evict=false, keep their nodes; the empty node still goes.
func TestPDBAndSafeToEvictKeepNodes(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("guarded", 3, 0, 4)}})
	// On different nodes, so that each protection is tested on its own.
	s.deploy("pinned", 1, smallPod, apart, withPodAnnotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"))
	s.deploy("budgeted", 1, smallPod, apart)
	s.pdb("budgeted", "budgeted", 0)
	s.waitRunning("pinned", 1, 30*time.Second)
	s.waitRunning("budgeted", 1, 30*time.Second)
	s.eventually("the PDB's status", 30*time.Second, func() error {
		p, err := s.kube.PolicyV1().PodDisruptionBudgets(s.ns).Get(s.ctx, "budgeted", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.CurrentHealthy != 1 || p.Status.DisruptionsAllowed != 0 {
			return fmt.Errorf("healthy %d, disruptions allowed %d", p.Status.CurrentHealthy, p.Status.DisruptionsAllowed)
		}
		return nil
	})
	protected := map[string]string{} // pod UID → node
	for _, app := range []string{"pinned", "budgeted"} {
		p := s.pods(app)[0]
		protected[string(p.UID)] = p.Spec.NodeName
	}
	keep := map[string]bool{}
	for _, n := range protected {
		keep[n] = true
	}
	if len(keep) != 2 {
		t.Fatalf("protected pods on %d node(s), want 2", len(keep))
	}

	s.startAutoscaler()
	s.waitTarget("guarded", 2, 90*time.Second)
	s.holds("protected pods and their nodes", 12*time.Second, func() error {
		if err := s.targetIs("guarded", 2)(); err != nil {
			return err
		}
		for uid, node := range protected {
			found := false
			for _, app := range []string{"pinned", "budgeted"} {
				for _, p := range s.pods(app) {
					if string(p.UID) == uid && p.Spec.NodeName == node && isReady(&p) {
						found = true
					}
				}
			}
			if !found {
				return fmt.Errorf("pod %s on %s was evicted or moved", uid, node)
			}
			if _, err := s.kube.CoreV1().Nodes().Get(s.ctx, node, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("node %s: %v", node, err)
			}
		}
		return nil
	})
	if tainted := s.taintedNodes(); len(tainted) != 0 {
		t.Errorf("nodes left with the deletion taint: %v", tainted)
	}
}

// 6. Pool settings changed through the DigitalOcean API are honoured on the next
// iteration; a pool whose auto_scale is turned off is no longer touched.
func TestPoolSettingsChangedThroughAPI(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("tuned", 1, 1, 5)}})
	s.startAutoscaler()
	s.updatePool("tuned", &godo.KubernetesNodePoolUpdateRequest{MaxNodes: ptr.To(2)})
	s.deploy("web", 4, bigPod)

	s.waitTarget("tuned", 2, 60*time.Second)
	s.waitEvent("NotTriggerScaleUp", 60*time.Second)
	s.holds("the lowered max of 2", 4*time.Second, s.targetIs("tuned", 2))

	s.updatePool("tuned", &godo.KubernetesNodePoolUpdateRequest{MaxNodes: ptr.To(4)})
	s.waitTarget("tuned", 4, 60*time.Second)
	s.waitRunning("web", 4, 60*time.Second)

	s.updatePool("tuned", &godo.KubernetesNodePoolUpdateRequest{MinNodes: ptr.To(3)})
	s.scaleDeployment("web", 0)
	s.waitTarget("tuned", 3, 90*time.Second)
	s.holds("the raised min of 3", 6*time.Second, s.targetIs("tuned", 3))

	s.updatePool("tuned", &godo.KubernetesNodePoolUpdateRequest{AutoScale: ptr.To(false)})
	time.Sleep(2 * time.Second) // let a loop in flight finish
	updates, deletes := s.sb.DOKS.RequestCount(doks.OpUpdateNodePool), s.sb.DOKS.RequestCount(doks.OpDeleteNode)
	s.scaleDeployment("web", 6) // pending pods that would have grown the pool
	s.holds("a pool without auto_scale left alone", 12*time.Second, func() error {
		if err := s.targetIs("tuned", 3)(); err != nil {
			return err
		}
		if u, d := s.sb.DOKS.RequestCount(doks.OpUpdateNodePool), s.sb.DOKS.RequestCount(doks.OpDeleteNode); u != updates || d != deletes {
			return fmt.Errorf("autoscaler changed the pool: %d updates and %d deletes since auto_scale went off", u-updates, d-deletes)
		}
		return nil
	})
}

// 7. A node that never registers: after --max-node-provision-time the pool's target
// shrinks back and the pool is backed off; a pool added later takes the pods.
func TestNodeThatNeverRegisters(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("broken", 0, 0, 3)}})
	s.sb.Agent.NeverRegister("broken")
	s.startAutoscaler("--max-node-provision-time=15s")
	s.deploy("web", 1, bigPod)
	s.waitTarget("broken", 1, 60*time.Second)
	start := time.Now()
	s.waitTarget("broken", 0, 90*time.Second)
	t.Logf("target shrank back %v after the scale-up", time.Since(start).Round(time.Second))
	// With a 1s scan interval, anything but a back-off would grow it again at once.
	s.holds("the broken pool backed off while the pod waits", 8*time.Second, func() error {
		if err := s.targetIs("broken", 0)(); err != nil {
			return err
		}
		for _, p := range s.pods("web") {
			if isReady(&p) {
				return fmt.Errorf("pod %s runs on %s, but no node should exist", p.Name, p.Spec.NodeName)
			}
		}
		return nil
	})
	if _, err := s.sb.CreatePool(doks.PoolSpec{Name: "healthy", Size: "s-4vcpu-8gb", Count: 0, AutoScale: true, MinNodes: 0, MaxNodes: 3}); err != nil {
		t.Fatal(err)
	}
	s.waitTarget("healthy", 1, 60*time.Second)
	s.waitRunning("web", 1, 60*time.Second)
	s.holds("the broken pool still backed off", 3*time.Second, s.targetIs("broken", 0))
	if m := s.maxTarget("broken"); m != 1 {
		t.Errorf("the broken pool reached %d nodes, want 1", m)
	}
}

// 8. The API fails with 500s, then rate-limits with 429s: the autoscaler keeps running,
// recovers when the API does, and does not overshoot.
func TestAPIErrorsRecoverWithoutOvershoot(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("flaky", 1, 1, 8)}})
	ca := s.startAutoscaler()
	s.eventually("the autoscaler's first pool list", 30*time.Second, func() error {
		if s.sb.DOKS.RequestCount(doks.OpListNodePools) == 0 {
			return fmt.Errorf("no request yet")
		}
		return nil
	})
	// Each phase lasts until the autoscaler has met its fault (its client may be
	// waiting out a backoff when the phase starts), and a few seconds more.
	seen := func(op, code string) {
		s.t.Helper()
		s.eventually(op+" answered "+code, 60*time.Second, func() error {
			if s.metric(ca, "cluster_autoscaler_digitalocean_api_requests_total", map[string]string{"operation": op, "code": code}) < 1 {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	s.sb.DOKS.InjectFault(doks.Fault{Status: 500, Message: "internal server error (injected)"})
	s.deploy("web", 4, bigPod)
	seen("ListNodePools", "500")
	time.Sleep(5 * time.Second)
	s.sb.DOKS.ClearFaults()
	s.sb.DOKS.InjectFault(doks.Fault{Status: 429, RetryAfter: time.Second, Message: "too many requests (injected)"})
	seen("ListNodePools", "429")
	time.Sleep(3 * time.Second)
	if !ca.Running() {
		t.Fatalf("the autoscaler exited during API errors: %v", ca.Err())
	}
	s.sb.DOKS.ClearFaults()
	// The API is back, but the first two pool updates still fail: the client's
	// retries carry the scale-up through.
	s.sb.DOKS.InjectFault(doks.Fault{Operation: doks.OpUpdateNodePool, Status: 503, Times: 2, Message: "service unavailable (injected)"})
	s.waitTarget("flaky", 4, 90*time.Second)
	s.waitRunning("web", 4, 60*time.Second)
	s.holds("target 4", 4*time.Second, s.targetIs("flaky", 4))
	if m := s.maxTarget("flaky"); m != 4 {
		t.Errorf("pool reached %d nodes, want exactly 4", m)
	}
	if !ca.Running() {
		t.Fatalf("the autoscaler exited: %v", ca.Err())
	}
	// The pool updates that failed were retried, and the metrics say so.
	if n := s.metric(ca, "cluster_autoscaler_digitalocean_api_requests_total", map[string]string{"operation": "UpdateNodePool", "code": "503"}); n != 2 {
		t.Errorf("UpdateNodePool answered 503 %v times, want 2", n)
	}
}

// 9. The autoscaler is killed in the middle of draining a node and started again: the new
// run removes the stale deletion taint, no node is left cordoned, no pod is lost.
func TestKilledMidDrainAndRestarted(t *testing.T) {
	// Evicted pods take 10s to terminate, which keeps the drain in progress long enough.
	s := newScenario(t, scenarioOptions{
		pools: []doks.PoolSpec{autoscaled("drained", 3, 1, 4)},
		agent: nodeagent.Options{TerminationDelay: 10 * time.Second},
	})
	s.deploy("web", 3, smallPod)
	s.waitRunning("web", 3, 30*time.Second)
	ca := s.startAutoscaler()
	var victim string
	s.eventually("a drain in progress", 90*time.Second, func() error {
		for _, node := range s.taintedNodes() {
			l, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range l.Items {
				if p.Spec.NodeName == node && p.DeletionTimestamp != nil {
					victim = node
					return nil
				}
			}
		}
		return fmt.Errorf("no tainted node with a terminating pod yet")
	})
	ca.Kill()
	t.Logf("killed the autoscaler while it drained %s", victim)
	if tainted := strings.Join(s.taintedNodes(), ","); !strings.Contains(tainted, victim) {
		t.Fatalf("the drained node lost its taint before the restart (tainted: %q)", tainted)
	}
	nodesBefore := s.pool("drained").Count

	// Scale-down off, so that whatever removes the taint is the start-up clean-up.
	s.startAutoscaler("--scale-down-enabled=false")
	s.eventually("no node left with the deletion taint", 30*time.Second, func() error {
		if tainted := s.taintedNodes(); len(tainted) > 0 {
			return fmt.Errorf("still tainted: %v", tainted)
		}
		return nil
	})
	s.waitRunning("web", 3, 60*time.Second)
	if got := s.pool("drained").Count; got != nodesBefore {
		t.Errorf("pool went from %d to %d nodes across the restart with scale-down off", nodesBefore, got)
	}
	node, err := s.kube.CoreV1().Nodes().Get(s.ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the half-drained node is gone: %v", err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == ToBeDeletedTaint || taint.Effect == apiv1.TaintEffectNoExecute {
			t.Errorf("node %s keeps taint %v", victim, taint)
		}
	}
}

// 10. The cluster's own autoscaler settings (cluster_autoscaler_configuration, set through the
// DigitalOcean API) stand in for flags the operator did not give: with no
// --scale-down-unneeded-time, the cluster's 3s applies instead of the 10m default.
func TestClusterAutoscalerSettingsApply(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("settled", 3, 1, 3)}})
	s.sb.DOKS.SetClusterAutoscalerConfiguration(&godo.KubernetesClusterAutoscalerConfiguration{
		ScaleDownUnneededTime: godo.PtrTo("3s")})
	start := time.Now()
	ca := s.startAutoscalerWithout("scale-down-unneeded-time")
	s.waitTarget("settled", 1, 60*time.Second)
	t.Logf("empty pool shrank 3 → 1 in %v with the cluster's unneeded time", time.Since(start).Round(time.Second))
	if l := logLines(ca.LogPath, "scale_down_unneeded_time=3s (used for every node group)"); len(l) != 1 {
		t.Errorf("want one log line saying the cluster's unneeded time applies, got %q", l)
	}
}
