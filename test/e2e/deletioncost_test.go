package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/actuation"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// With --pod-deletion-cost-on-unneeded-nodes, a Deployment scaling in
// deletes its pod on the unneeded node, which empties without an eviction.
// The kube-controller-manager's ReplicaSet controller picks the pod: left
// to its own ranking it would delete one of the two pods doubled up on the
// needed node.
func TestDeploymentScaleInDeletesThePodOfTheUnneededNode(t *testing.T) {
	const pool = "costs"
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled(pool, 2, 1, 2)}})
	s.waitNodes(pool, 2, 60*time.Second)
	nodes := s.poolNodes(pool)
	a, b := nodes[0].Name, nodes[1].Name

	// One web pod on a; two more and a pod that may not move on b: b is
	// needed, a is not (its pod fits on b).
	onPool := withNodeSelector(nodeagent.LabelNodePool, pool)
	s.whileCordoned(b, func() {
		s.deploy("web", 1, smallPod, onPool)
		s.waitRunning("web", 1, 60*time.Second)
	})
	s.whileCordoned(a, func() {
		s.scaleDeployment("web", 3)
		s.waitRunning("web", 3, 60*time.Second)
	})
	s.pinnedPodOn(b, a, pool)
	on := map[string]string{}
	for _, p := range s.pods("web") {
		on[p.Name] = p.Spec.NodeName
	}
	// Unneeded for longer than the test: the node must empty by the
	// Deployment's own scale-in, not by a drain.
	s.startAutoscaler("--pod-deletion-cost-on-unneeded-nodes", "--scale-down-unneeded-time=10m")

	var marked string
	s.eventually("the web pod on the unneeded node given a deletion cost", 30*time.Second, func() error {
		marked = ""
		for _, p := range s.pods("web") {
			cost, node := p.Annotations[scaledown.PodDeletionCostKey], p.Annotations[scaledown.UnneededNodeKey]
			switch {
			case p.Spec.NodeName == a && (cost != scaledown.UnneededPodDeletionCost || node != a):
				return fmt.Errorf("pod %s on %s: cost %q, unneeded node %q", p.Name, a, cost, node)
			case p.Spec.NodeName == a:
				marked = p.Name
			case cost != "" || node != "":
				return fmt.Errorf("pod %s on the needed node %s has cost %q, unneeded node %q", p.Name, b, cost, node)
			}
		}
		if marked == "" {
			return fmt.Errorf("no web pod on %s: %v", a, on)
		}
		return nil
	})

	s.scaleDeployment("web", 2)
	s.eventually("the Deployment scaled in to its two pods on the needed node", 30*time.Second, func() error {
		var where []string
		for _, p := range s.pods("web") {
			if p.DeletionTimestamp == nil {
				where = append(where, p.Spec.NodeName)
			}
		}
		if len(where) != 2 || where[0] != b || where[1] != b {
			return fmt.Errorf("web pods on %v, want two on %s", where, b)
		}
		return nil
	})
	// The autoscaler records ScaleDown on each pod it evicts.
	for _, e := range s.events("ScaleDown") {
		if e.InvolvedObject.Kind == "Pod" {
			t.Errorf("pod %s evicted: %s", e.InvolvedObject.Name, e.Message)
		}
	}
}

// The deletion cost's patch holds only for the pod as the loop read it:
// against the real API server, a pod whose owner set a cost of its own
// after the read answers Conflict and keeps its cost; the pod as read now
// gets ours; taking it off leaves a cost its owner set in its place.
func TestDeletionCostPatchIsConditional(t *testing.T) {
	ctx := context.Background()
	kube := sharedCP.Client
	ns := "e2e-deletioncostpatchisconditional"
	if err := sharedCP.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	// No scheduler takes it: nothing but the test writes the pod.
	pod := newDeployment(ns, "p", 1, smallPod).Spec.Template
	created, err := kube.CoreV1().Pods(ns).Create(ctx, &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: pod.Labels},
		Spec: func() apiv1.PodSpec { s := pod.Spec; s.SchedulerName = "none"; return s }()}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owners := created.DeepCopy()
	owners.Annotations = map[string]string{scaledown.PodDeletionCostKey: "5"}
	updated, err := kube.CoreV1().Pods(ns).Update(ctx, owners, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budget := actuation.SoftTaintBudget{Count: 10, Time: time.Minute}
	res := actuation.UpdateDeletionCosts(ctx, kube, []scaledown.PodOnNode{{Pod: created, Node: "n1"}}, nil, budget, time.Now)
	if len(res.Marked) != 0 || len(res.Errors) != 0 || res.Skipped != 1 {
		t.Fatalf("patch of the pod as read before its owner's update: %+v, want a conflict (skipped, no error)", res)
	}
	get := func() map[string]string {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Annotations
	}
	if a := get(); a[scaledown.PodDeletionCostKey] != "5" || a[scaledown.UnneededNodeKey] != "" {
		t.Fatalf("after the refused patch: annotations %v", a)
	}
	// Read again, the pod is patched (the caller would skip it, having a
	// cost of its own; the patch's condition is what is tested here).
	res = actuation.UpdateDeletionCosts(ctx, kube, []scaledown.PodOnNode{{Pod: updated, Node: "n1"}}, nil, budget, time.Now)
	if len(res.Marked) != 1 {
		t.Fatalf("patch of the pod as read now: %+v", res)
	}
	marked, err := kube.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Its owner sets a cost in place of ours; taking ours off keeps it.
	marked.Annotations[scaledown.PodDeletionCostKey] = "9"
	if marked, err = kube.CoreV1().Pods(ns).Update(ctx, marked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res = actuation.UpdateDeletionCosts(ctx, kube, nil, []*apiv1.Pod{marked}, budget, time.Now); len(res.Unmarked) != 1 {
		t.Fatalf("taking the cost off: %+v", res)
	}
	if a := get(); a[scaledown.PodDeletionCostKey] != "9" || a[scaledown.UnneededNodeKey] != "" {
		t.Errorf("after taking ours off: annotations %v, want the owner's cost 9 alone", a)
	}
}
