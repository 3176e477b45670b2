package pods

import (
	"errors"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

type appendPod string

func (a appendPod) Process(_ *Context, pending []*apiv1.Pod) ([]*apiv1.Pod, error) {
	if a == "fail" {
		return nil, errors.New("fail")
	}
	p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(a)}}
	MarkFake(p)
	return append(pending, p), nil
}
func (appendPod) CleanUp() {}

func TestCombinedRunsInOrderAfterRealPods(t *testing.T) {
	real := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real"}}
	out, err := Combined{appendPod("a"), appendPod("b")}.Process(&Context{}, []*apiv1.Pod{real})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range out {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "real,a,b" || IsFake(out[0]) || !IsFake(out[1]) {
		t.Errorf("got %v (fake: %v %v)", names, IsFake(out[0]), IsFake(out[1]))
	}
	if _, err := (Combined{appendPod("a"), appendPod("fail")}).Process(&Context{}, nil); err == nil {
		t.Error("a processor's error is lost")
	}
}

func TestFakePodEventsGoToTheOwner(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	rec.IncludeObject = true
	r := FakePodEvents(rec)
	fake := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "capacity-buffer-b-1", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "autoscaling.x-k8s.io/v1beta1", Kind: "CapacityBuffer", Name: "b", UID: "u", Controller: ptr.To(true)}}}}
	MarkFake(fake)
	orphan := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}}
	MarkFake(orphan)
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

// A resource given only as a limit is requested, as the API server
// defaults a real pod; explicit requests stay.
func TestRequestsFromLimits(t *testing.T) {
	gpu := apiv1.ResourceName("nvidia.com/gpu")
	spec := apiv1.PodSpec{
		InitContainers: []apiv1.Container{{Name: "init", Resources: apiv1.ResourceRequirements{
			Limits: apiv1.ResourceList{apiv1.ResourceMemory: resource.MustParse("1Gi")}}}},
		Containers: []apiv1.Container{{Name: "train", Resources: apiv1.ResourceRequirements{
			Limits:   apiv1.ResourceList{gpu: resource.MustParse("8"), apiv1.ResourceCPU: resource.MustParse("4")},
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("2")}}}},
	}
	RequestsFromLimits(&spec)
	got := spec.Containers[0].Resources.Requests
	if q := got[gpu]; q.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("gpu request %v, want the limit 8", q.String())
	}
	if q := got[apiv1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("cpu request %v, want the explicit 2", q.String())
	}
	if q := spec.InitContainers[0].Resources.Requests[apiv1.ResourceMemory]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("init container memory request %v, want the limit 1Gi", q.String())
	}
}
