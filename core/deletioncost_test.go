package core

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

func (h *harness) podAnnotations(name string) map[string]string {
	h.t.Helper()
	p, err := h.kube.CoreV1().Pods("default").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p.Annotations
}

// With --pod-deletion-cost-on-unneeded-nodes, the ReplicaSet pods of an
// unneeded node get the deletion cost and the marker naming the node; a
// pod with a deletion cost of its own keeps it; once the node is needed
// again both annotations come off the pods that got them.
func TestUnneededNodesPodsGetADeletionCost(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	own := test.BuildScheduledPod("own-cost", 100, 128*test.MiB, "rs-own", "g1-n1")
	own.Annotations = map[string]string{scaledown.PodDeletionCostKey: "7"}
	o := testOptions()
	o.PodDeletionCostOnUnneededNodes = true
	h := newHarness(t, o, p, append(objs, own)...)
	h.runOnce(t0)
	if a := h.podAnnotations("light"); a[scaledown.PodDeletionCostKey] != scaledown.UnneededPodDeletionCost || a[scaledown.UnneededNodeKey] != "g1-n1" {
		t.Fatalf("pod light on the unneeded g1-n1: annotations %v", a)
	}
	if a := h.podAnnotations("busy"); len(a) != 0 {
		t.Errorf("pod busy on the needed g1-n0: annotations %v", a)
	}
	if a := h.podAnnotations("own-cost"); a[scaledown.PodDeletionCostKey] != "7" || a[scaledown.UnneededNodeKey] != "" {
		t.Errorf("pod own-cost, whose owner set its cost: annotations %v", a)
	}
	h.waitCache("light's deletion cost", func() bool {
		p, err := h.a.cache.pods.Pods("default").Get("light")
		return err == nil && p.Annotations[scaledown.UnneededNodeKey] != ""
	})
	// A pod lands on n1: it is needed again.
	h.createPod(test.BuildScheduledPod("newcomer", 1500, test.GiB, "rs-new", "g1-n1"))
	h.runOnce(t0.Add(time.Minute))
	if a := h.podAnnotations("light"); len(a) != 0 {
		t.Errorf("pod light on g1-n1, needed again: annotations %v", a)
	}
	if a := h.podAnnotations("own-cost"); a[scaledown.PodDeletionCostKey] != "7" {
		t.Errorf("pod own-cost lost its owner's cost: annotations %v", a)
	}
}

// Without the flag, a pod this autoscaler marked earlier (the flag was on
// before a restart) loses both annotations; a cost its owner set later in
// place of ours stays.
func TestDeletionCostsTakenOffWithTheFlagOff(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	marked := func(name, cost string) runtime.Object {
		pod := test.BuildScheduledPod(name, 100, 128*test.MiB, "rs-"+name, "g1-n0")
		pod.Annotations = map[string]string{scaledown.PodDeletionCostKey: cost, scaledown.UnneededNodeKey: "g1-n0"}
		return pod
	}
	h := newHarness(t, testOptions(), p, append(objs, marked("ours", scaledown.UnneededPodDeletionCost), marked("theirs", "3"))...)
	h.runOnce(t0)
	if a := h.podAnnotations("ours"); len(a) != 0 {
		t.Errorf("pod ours: annotations %v, want none", a)
	}
	if a := h.podAnnotations("theirs"); a[scaledown.PodDeletionCostKey] != "3" || a[scaledown.UnneededNodeKey] != "" {
		t.Errorf("pod theirs: annotations %v, want its own cost alone", a)
	}
}
