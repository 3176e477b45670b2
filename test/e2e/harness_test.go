package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/controlplane"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// Shared by every scenario: the control plane (seconds to start) and the binary under test.
var (
	sharedCP  *controlplane.ControlPlane
	caBinary  string
	artifacts string
)

// ToBeDeletedTaint is the taint the autoscaler puts on nodes it is removing.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var err error
	artifacts, err = os.MkdirTemp("", "ca-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	caBinary = os.Getenv("CA_BINARY")
	if caBinary == "" {
		start := time.Now()
		if caBinary, err = buildBinary(artifacts); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building the autoscaler:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: built %s in %v (set CA_BINARY to skip)\n", caBinary, time.Since(start).Round(time.Second))
	}
	logPath := filepath.Join(artifacts, "controlplane.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer logFile.Close()
	sharedCP, err = controlplane.Start(controlplane.Options{Dir: filepath.Join(artifacts, "controlplane"), LogOutput: logFile})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: control plane: %v (logs in %s)\n", err, logPath)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane up in %v (etcd %v, apiserver %v, scheduler %v); logs in %s\n",
		sharedCP.Timings.Total.Round(time.Millisecond), sharedCP.Timings.Etcd.Round(time.Millisecond),
		sharedCP.Timings.APIServer.Round(time.Millisecond), sharedCP.Timings.Scheduler.Round(time.Millisecond), logPath)
	code := m.Run()
	sharedCP.Stop()
	if code == 0 {
		_ = os.RemoveAll(artifacts)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", artifacts)
	}
	return code
}

// repoRoot is two directories above this file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func buildBinary(dir string) (string, error) {
	out := filepath.Join(dir, "cluster-autoscaler")
	return out, sandbox.BuildAutoscaler(repoRoot(), out)
}

// scenario is one test's world: its own DOKS simulator and node agent on the shared
// control plane, its own namespace, and the autoscaler processes it starts.
type scenario struct {
	t    *testing.T
	ctx  context.Context
	sb   *sandbox.Sandbox
	kube kubernetes.Interface
	ns   string

	mu       sync.Mutex
	cas      []*autoscaler
	maxCount map[string]int // highest target size each pool reached
}

type scenarioOptions struct {
	pools     []doks.PoolSpec
	bootDelay time.Duration
	agent     nodeagent.Options
	// dropletLimit is the account's droplet limit; 0: none.
	dropletLimit int
	// region is the cluster's region; "" for the sandbox's default.
	region string
	// deleteDelay is how long a deleted droplet drains and lingers; the
	// sandbox's default when 0.
	deleteDelay time.Duration
}

func newScenario(t *testing.T, opts scenarioOptions) *scenario {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &scenario{t: t, ctx: ctx, kube: sharedCP.Client, maxCount: map[string]int{}}
	s.ns = "e2e-" + strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	bootDelay := opts.bootDelay
	if bootDelay == 0 {
		bootDelay = 2 * time.Second
	}
	sb, err := sandbox.Start(sandbox.Options{
		ControlPlane: sharedCP, Dir: filepath.Join(artifacts, s.ns), BootDelay: bootDelay,
		DeleteDelay: opts.deleteDelay, Pools: opts.pools, Agent: opts.agent, DropletLimit: opts.dropletLimit, Region: opts.region,
	})
	if err != nil {
		cancel()
		t.Fatalf("sandbox: %v", err)
	}
	s.sb = sb
	if err := sharedCP.EnsureNamespace(ctx, s.ns); err != nil {
		t.Fatal(err)
	}
	s.watchPools()
	t.Cleanup(func() {
		s.mu.Lock()
		cas := s.cas
		s.mu.Unlock()
		for _, ca := range cas {
			ca.Stop(15 * time.Second)
		}
		if t.Failed() {
			for _, ca := range cas {
				t.Logf("autoscaler log %s (last 150 lines):\n%s", ca.LogPath, tail(ca.LogPath, 150))
			}
		}
		cancel()
		s.deleteNamespace()
		sb.Stop()
	})
	return s
}

// watchPools records the highest target size of every pool, to catch overshoot that a
// later scale-down would hide.
func (s *scenario) watchPools() {
	changes, unsubscribe := s.sb.DOKS.Subscribe()
	record := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.sb.DOKS.Pools() {
			if p.Count > s.maxCount[p.Name] {
				s.maxCount[p.Name] = p.Count
			}
		}
	}
	record()
	go func() {
		defer unsubscribe()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-changes:
				record()
			}
		}
	}()
}

func (s *scenario) maxTarget(pool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxCount[pool]
}

func (s *scenario) deleteNamespace() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.kube.CoreV1().Namespaces().Delete(ctx, s.ns, metav1.DeleteOptions{})
	// Pods on nodes about to vanish would hold the namespace in Terminating.
	_ = s.kube.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, metav1.ListOptions{})
	// The capacity objects go at once too: the next scenario's autoscaler
	// watches every namespace, and a ProvisioningRequest left in a
	// Terminating one would still book nodes on its pools (the CRDs may not
	// be installed yet: errors are ignored).
	if dyn, err := dynamic.NewForConfig(sharedCP.Config); err == nil {
		for _, gvr := range []schema.GroupVersionResource{v1.ProvisioningRequestsResource, v1beta1.CapacityBuffersResource} {
			_ = dyn.Resource(gvr).Namespace(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	}
}

// autoscaler is one run of the production binary.
type autoscaler = sandbox.Process

// baseArgs returns the flags for fast loops and short delays so that scenarios take seconds.
func (s *scenario) baseArgs() []string {
	return append(s.sb.AutoscalerArgs(),
		"--namespace="+s.ns,
		"--leader-elect=false",
		"--scan-interval=1s",
		"--scale-down-unneeded-time=5s",
		"--scale-down-delay-after-add=5s",
		"--scale-down-delay-after-delete=0s",
		"--scale-down-delay-after-failure=3s",
		// Upstream waits 5s after tainting; a scenario needs only the race covered.
		"--node-delete-delay-after-taint=200ms",
		"--max-node-provision-time=2m",
		"--new-pod-scale-up-delay=0s",
		"--address=127.0.0.1:"+strconv.Itoa(freePort(s.t)),
		"--v=4",
	)
}

// startAutoscaler runs the binary with baseArgs followed by extra (later flags win).
func (s *scenario) startAutoscaler(extra ...string) *autoscaler {
	s.t.Helper()
	return s.startAutoscalerArgs(append(s.baseArgs(), extra...))
}

// startAutoscalerWithout runs the binary with baseArgs less the named flags, as an operator
// who never gave them would.
func (s *scenario) startAutoscalerWithout(flags ...string) *autoscaler {
	s.t.Helper()
	var args []string
	for _, a := range s.baseArgs() {
		keep := true
		for _, f := range flags {
			if strings.HasPrefix(a, "--"+f+"=") {
				keep = false
			}
		}
		if keep {
			args = append(args, a)
		}
	}
	return s.startAutoscalerArgs(args)
}

func (s *scenario) startAutoscalerArgs(args []string) *autoscaler {
	s.t.Helper()
	s.mu.Lock()
	n := len(s.cas) + 1
	s.mu.Unlock()
	logPath := filepath.Join(artifacts, s.ns, fmt.Sprintf("autoscaler-%d.log", n))
	ca, err := sandbox.RunAutoscaler(caBinary, args, logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.cas = append(s.cas, ca)
	s.mu.Unlock()
	s.t.Logf("started autoscaler #%d (pid %d), log %s", n, ca.Cmd.Process.Pid, logPath)
	return ca
}

// get fetches path from the autoscaler's --address.
func (s *scenario) get(ca *autoscaler, path string) (int, string) {
	s.t.Helper()
	addr := ""
	for _, a := range ca.Cmd.Args {
		if v, ok := strings.CutPrefix(a, "--address="); ok {
			addr = v // the last one wins, as in flag parsing
		}
	}
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// metric scrapes /metrics and sums the series of name whose labels include
// want (Prometheus text format: name{k="v",...} value).
func (s *scenario) metric(ca *autoscaler, name string, want map[string]string) float64 {
	s.t.Helper()
	code, body := s.get(ca, "/metrics")
	if code != http.StatusOK {
		s.t.Fatalf("/metrics answered %d", code)
	}
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		series, value := line[:sp], line[sp+1:]
		match := true
		for k, v := range want {
			if !strings.Contains(series, k+"=\""+v+"\"") {
				match = false
			}
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			s.t.Fatalf("metric line %q: %v", line, err)
		}
		sum += f
	}
	return sum
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// eventually polls cond until it returns nil or timeout passes.
func (s *scenario) eventually(what string, timeout time.Duration, cond func() error) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = cond(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// holds checks that cond stays nil for d.
func (s *scenario) holds(what string, d time.Duration, cond func() error) {
	s.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := cond(); err != nil {
			s.t.Fatalf("%s did not hold: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *scenario) pool(name string) godo.KubernetesNodePool {
	s.t.Helper()
	p, ok := s.sb.Pool(name)
	if !ok {
		s.t.Fatalf("no pool %q", name)
	}
	return p
}

// targetIs checks that the pool's count (target size) is n.
func (s *scenario) targetIs(pool string, n int) func() error {
	return func() error {
		if got := s.pool(pool).Count; got != n {
			return fmt.Errorf("pool %s target %d, want %d", pool, got, n)
		}
		return nil
	}
}

// nodesAre checks that the pool has n registered Nodes.
func (s *scenario) nodesAre(pool string, n int) func() error {
	return func() error {
		got, err := s.sb.RegisteredNodes(s.ctx, pool)
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("pool %s has %d nodes, want %d", pool, got, n)
		}
		return nil
	}
}

func (s *scenario) waitTarget(pool string, n int, timeout time.Duration) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("pool %s target %d", pool, n), timeout, s.targetIs(pool, n))
}

func (s *scenario) waitNodes(pool string, n int, timeout time.Duration) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("pool %s with %d nodes", pool, n), timeout, s.nodesAre(pool, n))
}

func (s *scenario) updatePool(pool string, req *godo.KubernetesNodePoolUpdateRequest) {
	s.t.Helper()
	p := s.pool(pool)
	if _, _, err := s.sb.GodoClient().Kubernetes.UpdateNodePool(s.ctx, s.sb.ClusterID, p.ID, req); err != nil {
		s.t.Fatalf("updating pool %s: %v", pool, err)
	}
}

type deployOption func(*appsv1.Deployment)

func withPodAnnotation(k, v string) deployOption {
	return func(d *appsv1.Deployment) {
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations[k] = v
	}
}

func withNodeSelector(k, v string) deployOption {
	return func(d *appsv1.Deployment) {
		if d.Spec.Template.Spec.NodeSelector == nil {
			d.Spec.Template.Spec.NodeSelector = map[string]string{}
		}
		d.Spec.Template.Spec.NodeSelector[k] = v
	}
}

// apart keeps the pods of every Deployment created with it on different nodes
// (required anti-affinity on the hostname).
func apart(d *appsv1.Deployment) {
	labels := map[string]string{"apart": "yes"}
	maps.Copy(labels, d.Spec.Template.Labels)
	d.Spec.Template.Labels = labels
	d.Spec.Template.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
			TopologyKey:   apiv1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"apart": "yes"}},
		}},
	}}
}

// newDeployment is a Deployment in ns of replicas pause pods, each requesting
// cpu and 64Mi, with opts applied.
func newDeployment(ns, name string, replicas int, cpu string, opts ...deployOption) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: apiv1.PodSpec{Containers: []apiv1.Container{{
					Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
						apiv1.ResourceCPU:    resource.MustParse(cpu),
						apiv1.ResourceMemory: resource.MustParse("64Mi"),
					}},
				}}},
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// deploy creates a Deployment of replicas pods, each requesting cpu.
func (s *scenario) deploy(name string, replicas int, cpu string, opts ...deployOption) {
	s.t.Helper()
	d := newDeployment(s.ns, name, replicas, cpu, opts...)
	if _, err := s.kube.AppsV1().Deployments(s.ns).Create(s.ctx, d, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("deployment %s: %v", name, err)
	}
}

func (s *scenario) scaleDeployment(name string, replicas int) {
	s.t.Helper()
	// The scale subresource carries the Deployment's resourceVersion: the
	// controller's status write between the read and the update is a
	// conflict, read again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := s.kube.AppsV1().Deployments(s.ns).GetScale(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = int32(replicas)
		_, err = s.kube.AppsV1().Deployments(s.ns).UpdateScale(s.ctx, name, sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) pdb(name, app string, maxUnavailable int) {
	s.t.Helper()
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(maxUnavailable))),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	if _, err := s.kube.PolicyV1().PodDisruptionBudgets(s.ns).Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// pods of a Deployment, those being deleted left out.
func (s *scenario) pods(app string) []apiv1.Pod {
	s.t.Helper()
	l, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []apiv1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func isReady(p *apiv1.Pod) bool {
	if p.Status.Phase != apiv1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == apiv1.PodReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

// runningAre checks that exactly n pods of app run Ready, and none is pending.
func (s *scenario) runningAre(app string, n int) func() error {
	return func() error {
		ready, pending := 0, 0
		for _, p := range s.pods(app) {
			if isReady(&p) {
				ready++
			} else {
				pending++
			}
		}
		if ready != n || pending != 0 {
			return fmt.Errorf("%s: %d pods running, %d not, want %d running", app, ready, pending, n)
		}
		return nil
	}
}

func (s *scenario) waitRunning(app string, n int, timeout time.Duration) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("%d running %s pods", n, app), timeout, s.runningAre(app, n))
}

// events in the scenario's namespace with the given reason.
func (s *scenario) events(reason string) []apiv1.Event {
	s.t.Helper()
	l, err := s.kube.CoreV1().Events(s.ns).List(s.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", reason).String(),
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return l.Items
}

func (s *scenario) waitEvent(reason string, timeout time.Duration) apiv1.Event {
	s.t.Helper()
	var ev apiv1.Event
	s.eventually("an event "+reason, timeout, func() error {
		evs := s.events(reason)
		if len(evs) == 0 {
			return fmt.Errorf("none yet")
		}
		ev = evs[0]
		return nil
	})
	return ev
}

// taintedNodes returns the Nodes of the cluster carrying the autoscaler's deletion taint.
func (s *scenario) taintedNodes() []string { return s.nodesWithTaint(ToBeDeletedTaint) }

// nodesWithTaint returns the Nodes of the cluster carrying a taint with key.
func (s *scenario) nodesWithTaint(key string) []string {
	s.t.Helper()
	l, err := s.kube.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, n := range l.Items {
		for _, t := range n.Spec.Taints {
			if t.Key == key {
				out = append(out, n.Name)
			}
		}
	}
	return out
}
