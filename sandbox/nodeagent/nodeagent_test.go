package nodeagent

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	"golang.org/x/oauth2"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/controlplane"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

const (
	clusterID = "0c0ffee0-0000-4000-8000-000000000001"
	simToken  = "sim-token"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	logFile, err := os.CreateTemp("", "nodeagent-test-*.log")
	if err != nil {
		panic(err)
	}
	cp, err = controlplane.Start(controlplane.Options{LogOutput: logFile})
	if err != nil {
		os.Stderr.WriteString("control plane: " + err.Error() + "\n")
		os.Exit(1)
	}
	code := m.Run()
	cp.Stop()
	logFile.Close()
	if code == 0 {
		os.Remove(logFile.Name())
	} else {
		os.Stderr.WriteString("control-plane logs: " + logFile.Name() + "\n")
	}
	os.Exit(code)
}

type env struct {
	sim   *doks.Server
	agent *Agent
	api   *godo.Client
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	sim := doks.NewServer(doks.Options{ClusterID: clusterID, Token: simToken, BootDelay: 200 * time.Millisecond, DeleteDelay: 200 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	agent := New(cp.Client, sim, opts)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)
	api, err := godo.New(oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: simToken})), godo.SetBaseURL(sim.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return &env{sim: sim, agent: agent, api: api}
}

func (e *env) resize(t *testing.T, poolID string, count int) {
	t.Helper()
	if _, _, err := e.api.Kubernetes.UpdateNodePool(context.Background(), clusterID, poolID, &godo.KubernetesNodePoolUpdateRequest{Count: ptr.To(count)}); err != nil {
		t.Fatalf("resize pool: %v", err)
	}
}

func nodesOfPool(t *testing.T, pool string) []apiv1.Node {
	t.Helper()
	l, err := cp.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: LabelNodePool + "=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestPoolGrowthRegistersNodeAndRunsPod(t *testing.T) {
	e := newEnv(t, Options{Region: "fra1"})
	pool, err := e.sim.CreatePool(doks.PoolSpec{
		Name: "grow", Size: "s-2vcpu-4gb", Count: 0, AutoScale: true, MinNodes: 0, MaxNodes: 3,
		Labels: map[string]string{"team": "web"},
		Taints: []godo.Taint{{Key: "dedicated", Value: "web", Effect: "NoSchedule"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.resize(t, pool.ID, 1)
	var node apiv1.Node
	waitFor(t, "the new droplet's Node", 10*time.Second, func() bool {
		ns := nodesOfPool(t, "grow")
		if len(ns) == 1 {
			node = ns[0]
		}
		return len(ns) == 1
	})
	t.Logf("node %s registered %v after the pool grew (boot delay 200ms)", node.Name, time.Since(start))

	sim := e.sim.Pools()[0].Nodes[0]
	if node.Name != sim.Name {
		t.Errorf("node name %q, want the DOKS node name %q", node.Name, sim.Name)
	}
	if want := "digitalocean://" + sim.DropletID; node.Spec.ProviderID != want {
		t.Errorf("providerID %q, want %q", node.Spec.ProviderID, want)
	}
	for k, want := range map[string]string{
		LabelNodeID: sim.ID, LabelNodePool: "grow", LabelNodePoolID: pool.ID, "team": "web",
		apiv1.LabelHostname: sim.Name, apiv1.LabelOSStable: "linux", apiv1.LabelArchStable: "amd64",
		apiv1.LabelInstanceTypeStable: "s-2vcpu-4gb", apiv1.LabelTopologyRegion: "fra1",
	} {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s=%q, want %q", k, got, want)
		}
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "dedicated" || node.Spec.Taints[0].Effect != apiv1.TaintEffectNoSchedule {
		t.Errorf("taints %v, want the pool's dedicated=web:NoSchedule", node.Spec.Taints)
	}
	_, alloc, _ := doks.SizeResources("s-2vcpu-4gb")
	if got := node.Status.Allocatable[apiv1.ResourceCPU]; got.Cmp(alloc[apiv1.ResourceCPU]) != 0 {
		t.Errorf("allocatable cpu %v, want %v", got.String(), alloc.Cpu().String())
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		t.Errorf("node is not Ready: %v", node.Status.Conditions)
	}
	// The agent creates the Lease right after the Node's first status, as a kubelet's
	// lease controller starts after registration: wait for it rather than race it.
	waitFor(t, "the node's Lease", 5*time.Second, func() bool {
		_, err := cp.Client.CoordinationV1().Leases(apiv1.NamespaceNodeLease).Get(context.Background(), node.Name, metav1.GetOptions{})
		return err == nil
	})

	// A pod tolerating the pool's taint lands there and is reported Running and Ready.
	pod := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
		Spec: apiv1.PodSpec{
			Tolerations: []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpEqual, Value: "web", Effect: apiv1.TaintEffectNoSchedule}},
			Containers: []apiv1.Container{{Name: "app", Image: "nginx",
				Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}},
		},
	}
	created := time.Now()
	if _, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *apiv1.Pod
	waitFor(t, "the pod to run", 10*time.Second, func() bool {
		got, err = cp.Client.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
		return err == nil && got.Status.Phase == apiv1.PodRunning
	})
	t.Logf("pod bound and Running in %v", time.Since(created))
	if got.Spec.NodeName != node.Name || got.Status.PodIP == "" {
		t.Errorf("pod on %q with IP %q", got.Spec.NodeName, got.Status.PodIP)
	}
	for _, ct := range []apiv1.PodConditionType{apiv1.PodReady, apiv1.ContainersReady} {
		ok := false
		for _, c := range got.Status.Conditions {
			ok = ok || (c.Type == ct && c.Status == apiv1.ConditionTrue)
		}
		if !ok {
			t.Errorf("condition %s not true: %v", ct, got.Status.Conditions)
		}
	}

	// A graceful delete is finalised, since no kubelet would.
	if err := cp.Client.CoreV1().Pods("default").Delete(context.Background(), "web-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(30))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted pod to go", 10*time.Second, func() bool {
		_, err := cp.Client.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// Scaling the pool to zero removes the Node and the pods left on it.
	if _, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second pod to run", 10*time.Second, func() bool {
		got, err = cp.Client.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
		return err == nil && got.Status.Phase == apiv1.PodRunning
	})
	e.resize(t, pool.ID, 0)
	waitFor(t, "the node to go", 10*time.Second, func() bool { return len(nodesOfPool(t, "grow")) == 0 })
	waitFor(t, "its pod to go", 10*time.Second, func() bool {
		_, err := cp.Client.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func TestNeverRegisterLeavesDropletWithoutNode(t *testing.T) {
	e := newEnv(t, Options{})
	pool, err := e.sim.CreatePool(doks.PoolSpec{Name: "broken", Size: "s-1vcpu-2gb", Count: 1, AutoScale: true, MinNodes: 0, MaxNodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first node", 10*time.Second, func() bool { return len(nodesOfPool(t, "broken")) == 1 })
	e.agent.NeverRegister("broken")
	e.resize(t, pool.ID, 2)
	waitFor(t, "both droplets running", 10*time.Second, func() bool {
		running := 0
		for _, n := range e.sim.Pools()[0].Nodes {
			if n.Status.State == doks.StateRunning {
				running++
			}
		}
		return running == 2
	})
	time.Sleep(500 * time.Millisecond) // a few reconcile passes
	if n := len(nodesOfPool(t, "broken")); n != 1 {
		t.Fatalf("%d nodes registered, want only the one from before NeverRegister", n)
	}
	e.agent.AllowRegister("broken")
	waitFor(t, "the held-back node to register", 10*time.Second, func() bool { return len(nodesOfPool(t, "broken")) == 2 })
	e.resize(t, pool.ID, 0)
	waitFor(t, "cleanup", 10*time.Second, func() bool { return len(nodesOfPool(t, "broken")) == 0 })
}

func TestTerminationDelayKeepsPodTerminating(t *testing.T) {
	e := newEnv(t, Options{TerminationDelay: 700 * time.Millisecond})
	pool, err := e.sim.CreatePool(doks.PoolSpec{Name: "slowstop", Size: "s-2vcpu-4gb", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node", 10*time.Second, func() bool { return len(nodesOfPool(t, "slowstop")) == 1 })
	pod := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "default"},
		Spec:       apiv1.PodSpec{Containers: []apiv1.Container{{Name: "app", Image: "nginx"}}},
	}
	if _, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running", 10*time.Second, func() bool {
		p, err := cp.Client.CoreV1().Pods("default").Get(context.Background(), "slow", metav1.GetOptions{})
		return err == nil && p.Status.Phase == apiv1.PodRunning
	})
	deleted := time.Now()
	if err := cp.Client.CoreV1().Pods("default").Delete(context.Background(), "slow", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod to go", 10*time.Second, func() bool {
		_, err := cp.Client.CoreV1().Pods("default").Get(context.Background(), "slow", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if d := time.Since(deleted); d < 600*time.Millisecond {
		t.Fatalf("pod finalised after %v, before the 700ms termination delay", d)
	}
	e.resize(t, pool.ID, 0)
	waitFor(t, "cleanup", 10*time.Second, func() bool { return len(nodesOfPool(t, "slowstop")) == 0 })
}

// The autoscaler's case: pods wait Pending, the pool grows, and they must start on the new
// node even though the scheduler binds them the instant the Node appears.
func TestPendingPodsRunOnNewNode(t *testing.T) {
	e := newEnv(t, Options{})
	pool, err := e.sim.CreatePool(doks.PoolSpec{Name: "late", Size: "s-2vcpu-4gb", Count: 0, AutoScale: true, MinNodes: 0, MaxNodes: 2,
		Labels: map[string]string{"only": "late"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		pod := &apiv1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "waiting-" + string(rune('a'+i)), Namespace: "default"},
			Spec: apiv1.PodSpec{
				NodeSelector: map[string]string{"only": "late"},
				Containers: []apiv1.Container{{Name: "app", Image: "nginx",
					Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("500m")}}}},
			},
		}
		if _, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.resize(t, pool.ID, 1)
	waitFor(t, "all three pods running", 15*time.Second, func() bool {
		l, err := cp.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		running := 0
		for _, p := range l.Items {
			if len(p.Name) > 8 && p.Name[:8] == "waiting-" && p.Status.Phase == apiv1.PodRunning {
				running++
			}
		}
		return running == 3
	})
	e.resize(t, pool.ID, 0)
	waitFor(t, "cleanup", 10*time.Second, func() bool { return len(nodesOfPool(t, "late")) == 0 })
}

// Nodes registered together post their status as kubelets started at
// different times do: each once per interval, spread over it, so a watcher
// of Nodes sees the same rate from the first minute as an hour later.
func TestStatusReportsAreSpreadOverTheInterval(t *testing.T) {
	const nodes, interval, tick = 1000, 5 * time.Minute, 10 * time.Second
	registered := time.Date(2026, 12, 6, 12, 0, 3, 0, time.UTC)
	last := make([]time.Time, nodes)
	for i := range last {
		last[i] = registered
	}
	perMinute := make([]int, 10)
	for now := registered.Add(tick); now.Before(registered.Add(10 * time.Minute)); now = now.Add(tick) {
		for i := range last {
			if reportDue(fmt.Sprintf("pool-a-%d", i), last[i], now, interval) {
				last[i] = now
				perMinute[int(now.Sub(registered)/time.Minute)]++
			}
		}
	}
	total := 0
	for m, n := range perMinute {
		total += n
		// 200 a minute on average; a uniform spread of 1,000 phases stays
		// well within half of that either way.
		if n < 100 || n > 300 {
			t.Errorf("minute %d after registration: %d status reports, want about %d", m, n, nodes/5)
		}
	}
	// One per node per 5 minutes; a node whose second turn comes in the
	// last tick posts it after the 10 minutes counted.
	if least := 2*nodes - 2*nodes*int(tick)/int(interval); total < least || total > 2*nodes {
		t.Errorf("%d status reports in 10 minutes, want %d to %d (one per node per 5 minutes)", total, least, 2*nodes)
	}
}
