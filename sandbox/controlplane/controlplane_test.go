package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// One control plane for the whole package: starting one costs seconds.
var shared *ControlPlane

const viewerToken = "viewer-token-for-rbac-tests"

func TestMain(m *testing.M) {
	logFile, err := os.CreateTemp("", "controlplane-test-*.log")
	if err != nil {
		panic(err)
	}
	cp, err := Start(Options{
		LogOutput:   logFile,
		ExtraTokens: []TokenUser{{Token: viewerToken, Name: "viewer"}},
	})
	if err != nil {
		logFile.Close()
		os.Stderr.WriteString("control plane failed to start: " + err.Error() + " (logs in " + logFile.Name() + ")\n")
		os.Exit(1)
	}
	shared = cp
	os.Stderr.WriteString("control plane started: etcd " + cp.Timings.Etcd.String() + ", apiserver " + cp.Timings.APIServer.String() +
		", scheduler " + cp.Timings.Scheduler.String() + ", controllers " + cp.Timings.Controllers.String() + ", total " + cp.Timings.Total.String() + "\n")
	code := m.Run()
	cp.Stop()
	logFile.Close()
	if code == 0 {
		os.Remove(logFile.Name())
	}
	os.Exit(code)
}

func readyNode(name string) *apiv1.Node {
	res := apiv1.ResourceList{
		apiv1.ResourceCPU:    resource.MustParse("2"),
		apiv1.ResourceMemory: resource.MustParse("4Gi"),
		apiv1.ResourcePods:   resource.MustParse("110"),
	}
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: apiv1.NodeStatus{
			Capacity:    res,
			Allocatable: res,
			Conditions:  []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
}

func createReadyNode(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Create(ctx, readyNode(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	// Status is ignored on create; set it through the status subresource.
	n.Status = readyNode(name).Status
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node status: %v", err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func TestSchedulerBindsPendingPod(t *testing.T) {
	cs := shared.Client
	ctx := context.Background()
	createReadyNode(t, cs, "bind-node")
	pod := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bind-me", Namespace: "default"},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{
			Name: "c", Image: "registry.k8s.io/pause:3.10",
			Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("500m")}},
		}}},
	}
	start := time.Now()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	var node string
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "bind-me", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("pod was not bound: %v", err)
	}
	t.Logf("pending pod bound to %s in %v", node, time.Since(start))
	if node != "bind-node" {
		t.Fatalf("bound to %q, want bind-node", node)
	}
	_ = cs.CoreV1().Pods("default").Delete(ctx, "bind-me", *metav1.NewDeleteOptions(0))
}

// The scheduler's client is not throttled at its own defaults (50 requests a second,
// burst 100), which made it bind 10,000 pods, and mark 5,000 unschedulable, one
// request each at that pace in the 5,000-node benchmark.
func TestSchedulerClientHasTheSandboxLimits(t *testing.T) {
	got := shared.schedulerClient
	if got == nil {
		t.Fatal("the scheduler's client config was not kept")
	}
	if got.QPS != ClientQPS || got.Burst != ClientBurst {
		t.Errorf("scheduler client QPS %v burst %d, want %d and %d", got.QPS, got.Burst, ClientQPS, ClientBurst)
	}
}

func TestPodTooBigStaysPending(t *testing.T) {
	cs := shared.Client
	ctx := context.Background()
	createReadyNode(t, cs, "small-node")
	pod := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: "default"},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{
			Name: "c", Image: "pause",
			Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("64")}},
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	defer cs.CoreV1().Pods("default").Delete(ctx, "too-big", *metav1.NewDeleteOptions(0))
	// The scheduler marks it unschedulable, which is what the autoscaler looks for.
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == apiv1.PodScheduled && c.Status == apiv1.ConditionFalse && c.Reason == apiv1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod never marked unschedulable: %v", err)
	}
}

func TestDeploymentControllersMakePods(t *testing.T) {
	cs := shared.Client
	ctx := context.Background()
	if err := shared.EnsureNamespace(ctx, "deploy-test"); err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "deploy-test"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Image: "pause"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("deploy-test").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("deploy-test").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 3, nil
	})
	if err != nil {
		t.Fatalf("deployment did not create 3 pods: %v", err)
	}
	// Deleting the namespace exercises the namespace controller and garbage collector.
	if err := cs.CoreV1().Namespaces().Delete(ctx, "deploy-test", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "deploy-test", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace was not finalised: %v", err)
	}
}

func TestRBACIsEnforced(t *testing.T) {
	viewer, err := kubernetes.NewForConfig(shared.UserConfig(viewerToken))
	if err != nil {
		t.Fatal(err)
	}
	_, err = viewer.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a user with no RoleBinding listed nodes: err=%v", err)
	}
	anon, err := kubernetes.NewForConfig(shared.UserConfig("not-a-token"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = anon.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("an unknown token was accepted: err=%v", err)
	}
}

func TestKubeconfigWorksWithKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	var out bytes.Buffer
	cmd := exec.Command(kubectl, "--kubeconfig", shared.KubeconfigPath, "get", "namespace", "default", "-o", "name")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl failed: %v\n%s", err, out.String())
	}
	if strings.TrimSpace(out.String()) != "namespace/default" {
		t.Fatalf("kubectl said %q", out.String())
	}
	data, err := os.ReadFile(shared.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "insecure-skip-tls-verify") {
		t.Fatal("kubeconfig skips TLS verification; it should carry the serving CA")
	}
}

// Clients that parse the server version (Kueue, controller-runtime) need a
// semantic version, not the module build's placeholder.
func TestServerReportsTheKubernetesVersionItRuns(t *testing.T) {
	info, err := shared.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(goMod), "\tk8s.io/kubernetes "+KubernetesVersion+"\n") {
		t.Errorf("go.mod does not require k8s.io/kubernetes %s: KubernetesVersion must follow it", KubernetesVersion)
	}
	if info.GitVersion != KubernetesVersion || shared.Version != KubernetesVersion {
		t.Errorf("/version gitVersion %q, ControlPlane.Version %q; want %q", info.GitVersion, shared.Version, KubernetesVersion)
	}
	v, err := utilversion.ParseSemantic(info.GitVersion)
	if err != nil {
		t.Fatalf("gitVersion %q does not parse: %v", info.GitVersion, err)
	}
	if info.Major != fmt.Sprint(v.Major()) || info.Minor != fmt.Sprint(v.Minor()) {
		t.Errorf("major %q minor %q disagree with gitVersion %q", info.Major, info.Minor, info.GitVersion)
	}
}
