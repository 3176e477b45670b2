package e2e

import (
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// poolNodes lists the names of the pool's registered Nodes.
func (s *scenario) poolNodes(pool string) []apiv1.Node {
	s.t.Helper()
	l, err := s.kube.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{LabelSelector: nodeagent.LabelNodePool + "=" + pool})
	if err != nil {
		s.t.Fatal(err)
	}
	return l.Items
}

// setUnschedulable cordons or uncordons a node, to steer where the next pod lands.
func (s *scenario) setUnschedulable(name string, on bool) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.kube.CoreV1().Nodes().Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = on
		_, err = s.kube.CoreV1().Nodes().Update(s.ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatalf("cordon %s=%v: %v", name, on, err)
	}
}

// whileCordoned runs start with node cordoned, so that the pods it starts
// land elsewhere, and uncordons the node after.
func (s *scenario) whileCordoned(node string, start func()) {
	s.t.Helper()
	s.setUnschedulable(node, true)
	start()
	s.setUnschedulable(node, false)
}

// pinnedPodOn runs Deployment "pinned", one pod of the pool that may not be
// evicted (safe-to-evict=false), on node by cordoning other while it starts.
func (s *scenario) pinnedPodOn(node, other, pool string) {
	s.t.Helper()
	s.whileCordoned(other, func() {
		s.deploy("pinned", 1, smallPod, withNodeSelector(nodeagent.LabelNodePool, pool),
			withPodAnnotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"))
		s.waitRunning("pinned", 1, 60*time.Second)
	})
}

// deployIn creates a one-pod Deployment in namespace ns (kube-system for system pods),
// removed when the test ends.
func (s *scenario) deployIn(ns, name, cpu string, opts ...deployOption) {
	s.t.Helper()
	d := newDeployment(ns, name, 1, cpu, opts...)
	if _, err := s.kube.AppsV1().Deployments(ns).Create(s.ctx, d, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("deployment %s/%s: %v", ns, name, err)
	}
	s.t.Cleanup(func() {
		_ = sharedCP.Client.AppsV1().Deployments(ns).Delete(s.ctx, name, metav1.DeleteOptions{})
		_ = sharedCP.Client.CoreV1().Pods(ns).DeleteCollection(s.ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))},
			metav1.ListOptions{LabelSelector: "app=" + name})
	})
}

// podIn returns the one live pod of app in ns, once it runs.
func (s *scenario) runningPodIn(ns, app string, timeout time.Duration) apiv1.Pod {
	s.t.Helper()
	var pod apiv1.Pod
	s.eventually(fmt.Sprintf("a running %s/%s pod", ns, app), timeout, func() error {
		l, err := s.kube.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && isReady(&p) {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("none running among %d", len(l.Items))
	})
	return pod
}

// A kube-system pod with no PodDisruptionBudget keeps its node only until it is older
// than --blocking-system-pod-distruption-timeout: before, the node stays; after, the pod
// is evicted to the other node and its node goes.
func TestSystemPodBlocksOnlyUntilTimeout(t *testing.T) {
	const pool = "syspods"
	const timeout = 40 * time.Second
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled(pool, 2, 1, 2)}})
	s.waitNodes(pool, 2, 60*time.Second)
	nodes := s.poolNodes(pool)
	a, b := nodes[0].Name, nodes[1].Name

	// The system pod on a, a pod that may not move on b: neither node can go until the
	// system pod has aged past the timeout; then only a can, its pod fitting on b.
	sysApp := "sys-" + s.ns
	var sys apiv1.Pod
	s.whileCordoned(b, func() {
		s.deployIn(metav1.NamespaceSystem, sysApp, smallPod, withNodeSelector(nodeagent.LabelNodePool, pool))
		sys = s.runningPodIn(metav1.NamespaceSystem, sysApp, 60*time.Second)
	})
	s.pinnedPodOn(b, a, pool)
	if sys.Spec.NodeName != a {
		t.Fatalf("system pod on %s, want %s", sys.Spec.NodeName, a)
	}
	s.startAutoscaler("--blocking-system-pod-distruption-timeout=" + timeout.String())

	aged := sys.CreationTimestamp.Add(timeout)
	t.Logf("system pod %s created %s; older than the timeout from %s", sys.Name, sys.CreationTimestamp.Format(time.RFC3339), aged.Format(time.RFC3339))
	// Until the pod is old enough (less a margin for the autoscaler's loop), both stay.
	s.holds("both nodes kept while the system pod is young", time.Until(aged)-2*time.Second, func() error {
		if err := s.targetIs(pool, 2)(); err != nil {
			return err
		}
		if tainted := s.taintedNodes(); len(tainted) != 0 {
			return fmt.Errorf("nodes tainted for deletion: %v", tainted)
		}
		return nil
	})
	// Then a goes: the pod is older than the timeout, unneeded for 5s, drained.
	s.waitTarget(pool, 1, 60*time.Second)
	s.waitNodes(pool, 1, 60*time.Second)
	if left := s.poolNodes(pool); len(left) != 1 || left[0].Name != b {
		t.Fatalf("nodes left %v, want only %s", left, b)
	}
	moved := s.runningPodIn(metav1.NamespaceSystem, sysApp, 60*time.Second)
	if moved.Spec.NodeName != b {
		t.Errorf("system pod runs on %s after the drain, want %s", moved.Spec.NodeName, b)
	}
	s.waitRunning("pinned", 1, 30*time.Second)
}
