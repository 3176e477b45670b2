package report

import (
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

func TestFakePodEventsGoToTheOwner(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	rec.IncludeObject = true
	r := fakePodEvents{rec}
	fake := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "capacity-buffer-b-1", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "autoscaling.x-k8s.io/v1beta1", Kind: "CapacityBuffer", Name: "b", UID: "u", Controller: ptr.To(true)}}}}
	fakepods.MarkFake(fake)
	orphan := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}}
	fakepods.MarkFake(orphan)
	real := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real"}}

	r.Eventf(fake, apiv1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: %s", "[g 1->2]")
	r.Event(orphan, apiv1.EventTypeNormal, "NotTriggerScaleUp", "dropped")
	r.Event(real, apiv1.EventTypeNormal, "NotTriggerScaleUp", "kept")
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		"Normal TriggeredScaleUp fake pod capacity-buffer-b-1: pod triggered scale-up: [g 1->2] involvedObject{kind=CapacityBuffer,apiVersion=autoscaling.x-k8s.io/v1beta1}",
		"Normal NotTriggerScaleUp kept involvedObject{kind=,apiVersion=}", // a Pod without TypeMeta
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
}
