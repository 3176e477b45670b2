package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/controlplane"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// On a cluster that does not serve resource.k8s.io/v1 (Kubernetes before
// 1.34) the binary starts without DRA, says so, and scales up. Its own
// control plane, with the group off; no scheduler or controllers (this
// version's expect the group), so the test marks the pod unschedulable as
// the scheduler would.
func TestWithoutTheDRAAPITheAutoscalerRunsWithoutDRA(t *testing.T) {
	const ns = "e2e-no-dra"
	dir := filepath.Join(artifacts, ns) // where startAutoscaler puts its log
	cp, err := controlplane.Start(controlplane.Options{Dir: filepath.Join(dir, "controlplane"),
		NoScheduler: true, NoControllers: true, DisabledAPIs: []string{"resource.k8s.io/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	if _, err := cp.Client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1"); err == nil {
		t.Fatal("the control plane serves resource.k8s.io/v1; the test needs it off")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sb, err := sandbox.Start(sandbox.Options{ControlPlane: cp, Dir: dir, BootDelay: time.Second,
		Pools: []doks.PoolSpec{autoscaled("old", 0, 0, 3)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Stop)
	s := &scenario{t: t, ctx: ctx, sb: sb, kube: cp.Client, ns: ns, maxCount: map[string]int{}}
	if err := cp.EnsureNamespace(ctx, s.ns); err != nil {
		t.Fatal(err)
	}
	ca := s.startAutoscaler()
	t.Cleanup(func() { ca.Stop(15 * time.Second) })

	pod := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: s.ns},
		Spec: apiv1.PodSpec{
			NodeSelector: map[string]string{nodeagent.LabelNodePool: "old"},
			Containers: []apiv1.Container{{Name: "c", Image: "busybox:1.36", Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(bigPod)}}}},
		},
	}
	created, err := cp.Client.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse,
		Reason: apiv1.PodReasonUnschedulable, LastTransitionTime: metav1.Now()}}
	if _, err := cp.Client.CoreV1().Pods(s.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitTarget("old", 1, 60*time.Second)

	log, err := os.ReadFile(ca.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "Dynamic Resource Allocation is off"); n != 1 {
		t.Errorf("the log says %d times that DRA is off, want once", n)
	}
	if !strings.Contains(string(log), "does not serve resource.k8s.io/v1") {
		t.Error("the log does not say why DRA is off")
	}
}
