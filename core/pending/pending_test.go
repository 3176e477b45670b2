package pending

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

func TestFilter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).Add(time.Hour)
	prio := func(p int32) *int32 { return &p }
	young := test.BuildPendingPod("young", 100, test.MiB, "rs")
	young.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
	annotated := test.BuildPendingPod("annotated", 100, test.MiB, "rs")
	annotated.Annotations = map[string]string{PodScaleUpDelayAnnotation: "2h"}
	// An annotation may lengthen the delay, not shorten it below the flag.
	shorter := test.BuildPendingPod("shorter", 100, test.MiB, "rs")
	shorter.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
	shorter.Annotations = map[string]string{PodScaleUpDelayAnnotation: "1s"}
	badAnnotation := test.BuildPendingPod("bad-annotation", 100, test.MiB, "rs")
	badAnnotation.Annotations = map[string]string{PodScaleUpDelayAnnotation: "soon"}
	expendable := test.BuildPendingPod("expendable", 100, test.MiB, "rs")
	expendable.Spec.Priority = prio(-100)
	important := test.BuildPendingPod("important", 100, test.MiB, "rs")
	important.Spec.Priority = prio(1000)
	scheduled := test.BuildScheduledPod("scheduled", 100, test.MiB, "rs", "n1")
	noCondition := test.BuildPod("no-condition", 100, test.MiB, "rs")
	deleting := test.BuildPendingPod("deleting", 100, test.MiB, "rs")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	plain := test.BuildPendingPod("plain", 100, test.MiB, "rs")

	opts := config.Defaults()
	opts.NewPodScaleUpDelay = 30 * time.Second
	got := Filter([]*apiv1.Pod{young, annotated, shorter, badAnnotation, expendable, important, scheduled, noCondition, deleting, plain}, opts, now, func(string) bool { return false })
	var names []string
	for _, p := range got.Eligible {
		names = append(names, p.Name)
	}
	want := []string{"bad-annotation", "important", "plain"}
	if len(names) != len(want) {
		t.Fatalf("eligible = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("eligible = %v, want %v", names, want)
		}
	}
	if got.TooYoung != 3 || got.Expendable != 1 || got.SchedulerUnprocessed != 1 {
		t.Fatalf("tooYoung=%d expendable=%d schedulerUnprocessed=%d, want 3, 1 and 1 (no-condition)", got.TooYoung, got.Expendable, got.SchedulerUnprocessed)
	}
}
