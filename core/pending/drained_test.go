package pending

import (
	"slices"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

func TestDrainedPods(t *testing.T) {
	on := func(name, node string, edit func(p *apiv1.Pod)) *apiv1.Pod {
		p := test.BuildScheduledPod(name, 100, test.MiB, "rs", node)
		if edit != nil {
			edit(p)
		}
		return p
	}
	pods := []*apiv1.Pod{
		on("moving", "drained", nil),
		on("elsewhere", "kept", nil),
		on("terminating", "drained", func(p *apiv1.Pod) { p.DeletionTimestamp = &metav1.Time{} }),
		on("finished", "drained", func(p *apiv1.Pod) { p.Status.Phase = apiv1.PodSucceeded }),
		on("failed", "drained", func(p *apiv1.Pod) { p.Status.Phase = apiv1.PodFailed }),
		on("mirror", "drained", func(p *apiv1.Pod) { p.Annotations = map[string]string{drain.MirrorPodKey: "x"} }),
		test.BuildDaemonSetPod("ds", 100, test.MiB, "ds", "drained"),
		on("expendable", "drained", func(p *apiv1.Pod) { prio := int32(-20); p.Spec.Priority = &prio }),
	}
	got := Drained(pods, map[string]bool{"drained": true}, -10)
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s keeps node name %q; it must be pending", p.Name, p.Spec.NodeName)
		}
	}
	if !slices.Equal(names, []string{"moving"}) {
		t.Fatalf("drained pods = %v, want [moving]", names)
	}
	if pods[0].Spec.NodeName != "drained" {
		t.Fatal("the cached pod was modified")
	}
	if got := Drained(pods, nil, -10); got != nil {
		t.Fatalf("no drain in flight: got %d pods", len(got))
	}
}
