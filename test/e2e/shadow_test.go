package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// Shadow mode (--shadow, docs/shadow-mode.md): the autoscaler decides scale-ups,
// scale-downs and consolidations as usual and records them (events marked
// "[shadow] ", the status ConfigMap, metrics), and changes nothing. Each story
// checks both halves: the decision shows, and neither DigitalOcean (the
// simulator's changing requests) nor the API server (every request the autoscaler
// sent, through a recording proxy) saw a write to a node or a pod that was not a
// dry run; nodes are never tainted, pods never evicted, pools never resized.

const (
	shadowAnnotation = "cluster-autoscaler.kubernetes.io/shadow-mode"
	shadowPrefix     = "[shadow] "
)

// apiRecord is every request an autoscaler sent to the API server, through a
// reverse proxy in front of it.
type apiRecord struct {
	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	method string
	url    *url.URL
}

// recordAPI starts a proxy to the shared API server, authenticated as the admin,
// and returns a kubeconfig that points at it.
func (s *scenario) recordAPI() (kubeconfig string, rec *apiRecord) {
	s.t.Helper()
	rec = &apiRecord{}
	upstream, err := url.Parse(sharedCP.Config.Host)
	if err != nil {
		s.t.Fatal(err)
	}
	transport, err := rest.TransportFor(sharedCP.Config)
	if err != nil {
		s.t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.Transport = transport
	proxy.FlushInterval = -1 // watches stream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := *r.URL
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recordedRequest{method: r.Method, url: &u})
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	// After the autoscaler stopped (see startShadow): its watches would hold Close.
	s.t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	kubeconfig = filepath.Join(artifacts, s.ns, "kubeconfig-recorded")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		s.t.Fatal(err)
	}
	return kubeconfig, rec
}

// nodePodWrites splits the recorded writes to nodes and pods (their subresources,
// evictions among them, included) into dry runs and real ones, each as
// "METHOD path".
func (r *apiRecord) nodePodWrites() (dry, real []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.reqs {
		switch q.method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue
		}
		if !namesNodeOrPod(q.url.Path) {
			continue
		}
		line := q.method + " " + q.url.Path
		if q.url.Query().Get("dryRun") == "All" {
			dry = append(dry, line)
		} else {
			real = append(real, line)
		}
	}
	return dry, real
}

// namesNodeOrPod: /api/v1/nodes..., /api/v1/namespaces/<ns>/pods...
func namesNodeOrPod(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) < 3 || segs[0] != "api" {
		return false
	}
	rest := segs[2:]
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	return rest[0] == "nodes" || rest[0] == "pods"
}

// untouched records, from watches, every node ever seen with one of the
// autoscaler's taints and every pod of the scenario deleted or evicted.
type untouched struct {
	mu      sync.Mutex
	tainted map[string]string // node → taint key
	deleted map[string]string // pod UID → name
}

func (s *scenario) watchUntouched() *untouched {
	u := &untouched{tainted: map[string]string{}, deleted: map[string]string{}}
	ctx, cancel := context.WithCancel(s.ctx)
	s.t.Cleanup(cancel)
	nodes := informers.NewSharedInformerFactory(s.kube, 0)
	seeNode := func(obj any) {
		n, ok := obj.(*apiv1.Node)
		if !ok {
			return
		}
		for _, t := range n.Spec.Taints {
			if t.Key == ToBeDeletedTaint || t.Key == "DeletionCandidateOfClusterAutoscaler" {
				u.mu.Lock()
				u.tainted[n.Name] = t.Key
				u.mu.Unlock()
			}
		}
	}
	_, _ = nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seeNode, UpdateFunc: func(_, n any) { seeNode(n) },
	})
	pods := informers.NewSharedInformerFactoryWithOptions(s.kube, 0, informers.WithNamespace(s.ns))
	seePod := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*apiv1.Pod); ok {
			u.mu.Lock()
			u.deleted[string(p.UID)] = p.Name
			u.mu.Unlock()
		}
	}
	_, _ = pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, n any) {
			if p, ok := n.(*apiv1.Pod); ok && p.DeletionTimestamp != nil {
				seePod(p)
			}
		},
		DeleteFunc: seePod,
	})
	nodes.Start(ctx.Done())
	pods.Start(ctx.Done())
	nodes.WaitForCacheSync(ctx.Done())
	pods.WaitForCacheSync(ctx.Done())
	return u
}

func (u *untouched) check(t *testing.T) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for n, key := range u.tainted {
		t.Errorf("node %s was tainted %s in shadow mode", n, key)
	}
	for uid, name := range u.deleted {
		t.Errorf("pod %s (%s) was deleted or evicted in shadow mode", name, uid)
	}
}

// shadowRun is one shadow-mode autoscaler of a scenario and what watches it.
type shadowRun struct {
	s         *scenario
	ca        *autoscaler
	rec       *apiRecord
	untouched *untouched
	doChanges int // the simulator's changing requests before the start
	since     time.Time
}

func (s *scenario) startShadow(extra ...string) *shadowRun {
	s.t.Helper()
	kubeconfig, rec := s.recordAPI()
	r := &shadowRun{s: s, rec: rec, untouched: s.watchUntouched(), doChanges: len(s.sb.DOKS.Changes()), since: time.Now()}
	r.ca = s.startAutoscaler(append(append([]string{"--shadow"}, extra...), "--kubeconfig="+kubeconfig)...)
	// Cleanups run last first: the autoscaler stops before the proxy closes.
	s.t.Cleanup(func() { r.ca.Stop(15 * time.Second) })
	s.eventually("the autoscaler serving /metrics", 60*time.Second, func() error {
		resp, err := http.Get("http://" + r.address() + "/metrics")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return r
}

// address is the autoscaler's --address (the last one given wins).
func (r *shadowRun) address() string {
	addr := ""
	for _, a := range r.ca.Cmd.Args {
		if v, ok := strings.CutPrefix(a, "--address="); ok {
			addr = v
		}
	}
	return addr
}

// shadowEvent waits for an event of reason on the scenario's objects and checks it
// is marked.
func (r *shadowRun) shadowEvent(reason string, timeout time.Duration) apiv1.Event {
	r.s.t.Helper()
	ev := r.s.waitConsolidationEvent(reason, r.since, timeout)
	if !strings.HasPrefix(ev.Message, shadowPrefix) || ev.Annotations[shadowAnnotation] != "true" {
		r.s.t.Errorf("event %s not marked as a shadow decision: message %q, annotations %v", reason, ev.Message, ev.Annotations)
	}
	return ev
}

// nothingChanged checks the guarantee: no DigitalOcean write, no node or pod write
// but dry runs, no taint, no pod evicted; the status ConfigMap and the metrics say
// shadow mode. It returns the dry-run writes.
func (r *shadowRun) nothingChanged() []string {
	s, t := r.s, r.s.t
	t.Helper()
	if changes := s.sb.DOKS.Changes()[r.doChanges:]; len(changes) != 0 {
		t.Errorf("%d DigitalOcean write(s) in shadow mode: %+v", len(changes), changes)
	}
	dry, real := r.rec.nodePodWrites()
	if len(real) != 0 {
		t.Errorf("%d node or pod write(s) sent without dryRun=All: %v", len(real), real)
	}
	r.untouched.check(t)
	cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("status ConfigMap: %v", err)
	}
	if cm.Annotations[shadowAnnotation] != "true" || !strings.Contains(cm.Data["status"], "Shadow mode (--shadow)") {
		t.Errorf("status ConfigMap does not say shadow mode: annotations %v, status:\n%s", cm.Annotations, cm.Data["status"])
	}
	if v := s.metric(r.ca, "cluster_autoscaler_shadow_mode", nil); v != 1 {
		t.Errorf("cluster_autoscaler_shadow_mode = %v, want 1", v)
	}
	t.Logf("DigitalOcean writes: 0 of %d requests; node/pod writes: %d dry runs, %d real; dry runs: %v",
		s.sb.DOKS.TotalRequests(), len(dry), len(real), summarize(dry))
	return dry
}

// summarize counts lines by method and resource (nodes, pods, pods/eviction).
func summarize(lines []string) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		method, path, _ := strings.Cut(l, " ")
		res := "pods"
		switch {
		case strings.Contains(path, "/nodes"):
			res = "nodes"
		case strings.HasSuffix(path, "/eviction"):
			res = "pods/eviction"
		}
		out[method+" "+res]++
	}
	return out
}

// Pending pods: the scale-up is decided, recorded and counted once, and the pool
// is never resized.
func TestShadowScaleUp(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("up", 1, 1, 5)}})
	s.waitNodes("up", 1, 60*time.Second)
	s.deploy("web", 3, bigPod, withNodeSelector(nodeagent.LabelNodePool, "up"))
	// One runs on the node; two wait for nodes of their own.
	s.eventually("one web pod running, two pending", 60*time.Second, func() error {
		running, pending := 0, 0
		for _, p := range s.pods("web") {
			if isReady(&p) {
				running++
			} else if p.Spec.NodeName == "" {
				pending++
			}
		}
		if running != 1 || pending != 2 {
			return fmt.Errorf("%d running, %d pending", running, pending)
		}
		return nil
	})
	r := s.startShadow()

	ev := r.shadowEvent("TriggeredScaleUp", 60*time.Second)
	t.Logf("TriggeredScaleUp: %s", ev.Message)
	s.eventually("scaled_up_nodes_total 2", 30*time.Second, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_scaled_up_nodes_total", nil); n != 2 {
			return fmt.Errorf("scaled_up_nodes_total = %v", n)
		}
		return nil
	})
	// The would-be nodes are upcoming for the hold (half of --max-node-provision-time,
	// 1m here): the decision is not taken again meanwhile.
	s.holds("one decision, no resize", 15*time.Second, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_scaled_up_nodes_total", nil); n != 2 {
			return fmt.Errorf("scaled_up_nodes_total = %v, want 2", n)
		}
		return s.targetIs("up", 1)()
	})
	if n := s.metric(r.ca, "cluster_autoscaler_shadow_writes_total", map[string]string{"api": "cloud", "operation": "increase_size"}); n != 1 {
		t.Errorf("shadow_writes_total{cloud,increase_size} = %v, want 1", n)
	}
	// Once the hold is over the real target shows again, and the pods still
	// waiting get the same decision once more: no failed scale-up, no backoff
	// (the would-be nodes were never timed out).
	s.eventually("the scale-up decided again after the hold", 90*time.Second, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_scaled_up_nodes_total", nil); n != 4 {
			return fmt.Errorf("scaled_up_nodes_total = %v, want 4", n)
		}
		return nil
	})
	if n := s.metric(r.ca, "cluster_autoscaler_failed_scale_ups_total", nil); n != 0 {
		t.Errorf("failed_scale_ups_total = %v, want 0", n)
	}
	recorded := int32(0)
	for _, ev := range s.consolidationEvents("TriggeredScaleUp", r.since) {
		recorded += max(ev.Count, 1)
	}
	if recorded <= 2 {
		t.Errorf("TriggeredScaleUp recorded %d times for the 2 pods, want the second decision's too", recorded)
	}
	t.Logf("TriggeredScaleUp recorded %d times for 2 pods over two holds", recorded)
	if got := len(s.pods("web")); got != 3 {
		t.Errorf("%d web pods, want 3", got)
	}
	if m := s.maxTarget("up"); m != 1 {
		t.Errorf("pool reached target %d, want 1 throughout", m)
	}
	r.nothingChanged()
}

// An idle node: its removal is decided (taint and deletion as dry runs), recorded
// and counted once; the node stays, untainted, and the pool keeps its size.
func TestShadowScaleDown(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("down", 2, 1, 2)}})
	s.waitNodes("down", 2, 60*time.Second)
	s.deploy("app", 1, smallPod, withNodeSelector(nodeagent.LabelNodePool, "down"))
	s.waitRunning("app", 1, 60*time.Second)
	before := s.pods("app")[0]
	r := s.startShadow()

	s.eventually("a would-be removal", 90*time.Second, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_scaled_down_nodes_total", nil); n < 1 {
			return fmt.Errorf("scaled_down_nodes_total = %v", n)
		}
		return nil
	})
	var reasons []string
	for _, reason := range []string{"ScaleDownEmpty", "ScaleDown"} {
		if evs := s.consolidationEvents(reason, r.since); len(evs) > 0 {
			reasons = append(reasons, reason)
			for _, ev := range evs {
				if !strings.HasPrefix(ev.Message, shadowPrefix) || ev.Annotations[shadowAnnotation] != "true" {
					t.Errorf("event %s on %s/%s not marked: %q", reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
				}
			}
			t.Logf("%s: %s", reason, evs[0].Message)
		}
	}
	if len(reasons) == 0 {
		t.Error("no ScaleDown or ScaleDownEmpty event")
	}
	// The node removed in shadow is in no node group for the hold, and the pool is
	// at its minimum by the would-be target: nothing more is removed, and the
	// same removal is not decided again at every loop.
	s.holds("one removal, both nodes kept", 15*time.Second, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_scaled_down_nodes_total", nil); n != 1 {
			return fmt.Errorf("scaled_down_nodes_total = %v, want 1", n)
		}
		if err := s.nodesAre("down", 2)(); err != nil {
			return err
		}
		return s.targetIs("down", 2)()
	})
	if n := s.metric(r.ca, "cluster_autoscaler_shadow_writes_total", map[string]string{"api": "cloud", "operation": "delete_nodes"}); n != 1 {
		t.Errorf("shadow_writes_total{cloud,delete_nodes} = %v, want 1", n)
	}
	after := s.pods("app")
	if len(after) != 1 || after[0].UID != before.UID || after[0].Spec.NodeName != before.Spec.NodeName {
		t.Errorf("the app pod moved: was %s on %s", before.UID, before.Spec.NodeName)
	}
	dry := r.nothingChanged()
	tainting := 0
	for _, l := range dry {
		if strings.Contains(l, "/nodes/") && (strings.HasPrefix(l, "PUT") || strings.HasPrefix(l, "PATCH")) {
			tainting++
		}
	}
	if tainting == 0 {
		t.Error("no dry-run node update: the taint was not even tried")
	}
}

// Consolidation: a replacement is planned and its pool creation decided, recorded
// and counted; no pool is created, no node tainted, no pod moved.
func TestShadowConsolidation(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{widePool(3)}})
	s.deploy("app", 3, halfWide)
	s.waitRunning("app", 3, 60*time.Second)
	uids := map[string]bool{}
	for _, p := range s.pods("app") {
		uids[string(p.UID)] = true
	}
	r := s.startShadow(s.consolidationArgs(true)...)

	ev := r.shadowEvent("ConsolidationPlanned", consolidationTimeout)
	t.Logf("ConsolidationPlanned: %s", ev.Message)
	s.eventually("the replacement's would-be creation", consolidationTimeout, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_shadow_writes_total", map[string]string{"api": "cloud", "operation": "create_node_group"}); n < 1 {
			return fmt.Errorf("shadow_writes_total{cloud,create_node_group} = %v", n)
		}
		return nil
	})
	if n := s.metric(r.ca, "cluster_autoscaler_consolidation_commands_total", map[string]string{"result": "planned"}); n < 1 {
		t.Errorf("consolidation_commands_total{result=planned} = %v, want at least 1", n)
	}
	s.holds("nothing consolidated", 10*time.Second, func() error {
		if nodes := s.listedNodes(); nodes[wideSize] != 3 || len(nodes) != 1 {
			return fmt.Errorf("nodes %v", nodes)
		}
		if n := s.apiCreatedPools(); n != 0 {
			return fmt.Errorf("%d pools created", n)
		}
		for _, p := range s.pods("app") {
			if !uids[string(p.UID)] {
				return fmt.Errorf("pod %s is new: one was moved", p.Name)
			}
		}
		return nil
	})
	cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["status"], "consolidation:") {
		t.Errorf("status ConfigMap has no consolidation section:\n%s", cm.Data["status"])
	}
	r.nothingChanged()
}

// A node whose pod fits on the other: the drain is decided and recorded — taint and
// evictions as dry runs, the evicted pod shown gone to the drain's check, the node's
// deletion not sent — and the pod keeps running where it was.
func TestShadowScaleDownDrain(t *testing.T) {
	const pool = "drain"
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled(pool, 2, 1, 2)}})
	s.waitNodes(pool, 2, 60*time.Second)
	nodes := s.poolNodes(pool)
	a, b := nodes[0].Name, nodes[1].Name
	// One small pod on each node: neither is empty, either's pod fits on the other.
	s.whileCordoned(b, func() {
		s.deploy("one", 1, smallPod, withNodeSelector(nodeagent.LabelNodePool, pool))
		s.waitRunning("one", 1, 60*time.Second)
	})
	s.whileCordoned(a, func() {
		s.deploy("two", 1, smallPod, withNodeSelector(nodeagent.LabelNodePool, pool))
		s.waitRunning("two", 1, 60*time.Second)
	})
	before := map[string]string{} // pod UID → node
	for _, app := range []string{"one", "two"} {
		p := s.pods(app)[0]
		before[string(p.UID)] = p.Spec.NodeName
	}
	r := s.startShadow()

	s.eventually("a would-be drained removal", 90*time.Second, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_scaled_down_nodes_total", nil); n < 1 {
			return fmt.Errorf("scaled_down_nodes_total = %v", n)
		}
		return nil
	})
	var evicted, removed bool
	for _, ev := range s.consolidationEvents("ScaleDown", r.since) {
		if !strings.HasPrefix(ev.Message, shadowPrefix) || ev.Annotations[shadowAnnotation] != "true" {
			t.Errorf("event ScaleDown on %s/%s not marked: %q", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
		}
		evicted = evicted || (ev.InvolvedObject.Kind == "Pod" && strings.Contains(ev.Message, "deleting pod for node scale down"))
		removed = removed || (ev.InvolvedObject.Kind == "Node" && strings.Contains(ev.Message, "node removed by cluster autoscaler"))
		t.Logf("ScaleDown on %s/%s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
	}
	if !evicted || !removed {
		t.Errorf("events: pod evicted %v, node removed %v; want both", evicted, removed)
	}
	if evs := s.consolidationEvents("ScaleDownFailed", r.since); len(evs) > 0 {
		t.Errorf("ScaleDownFailed: %s", evs[0].Message)
	}
	s.holds("one removal, both nodes and pods kept", 15*time.Second, func() error {
		if n := s.metric(r.ca, "cluster_autoscaler_scaled_down_nodes_total", nil); n != 1 {
			return fmt.Errorf("scaled_down_nodes_total = %v, want 1", n)
		}
		if err := s.nodesAre(pool, 2)(); err != nil {
			return err
		}
		return s.targetIs(pool, 2)()
	})
	if n := s.metric(r.ca, "cluster_autoscaler_shadow_writes_total", map[string]string{"api": "kubernetes", "operation": "create_pods_eviction"}); n < 1 {
		t.Errorf("shadow_writes_total{kubernetes,create_pods_eviction} = %v, want at least 1", n)
	}
	if n := s.metric(r.ca, "cluster_autoscaler_shadow_writes_total", map[string]string{"api": "cloud", "operation": "delete_nodes"}); n != 1 {
		t.Errorf("shadow_writes_total{cloud,delete_nodes} = %v, want 1", n)
	}
	for _, app := range []string{"one", "two"} {
		for _, p := range s.pods(app) {
			if node, ok := before[string(p.UID)]; !ok || node != p.Spec.NodeName {
				t.Errorf("pod %s is new or moved (now on %s)", p.Name, p.Spec.NodeName)
			}
		}
	}
	dry := r.nothingChanged()
	if summarize(dry)["POST pods/eviction"] == 0 {
		t.Errorf("no dry-run eviction among %v", summarize(dry))
	}
}
