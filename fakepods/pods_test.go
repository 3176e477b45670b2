package fakepods

import (
	"errors"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A resource given only as a limit is requested, in containers and at pod
// level, as the API server defaults a real pod; explicit requests stay.
func TestRequestsFromLimits(t *testing.T) {
	gpu := apiv1.ResourceName("nvidia.com/gpu")
	q := resource.MustParse
	spec := apiv1.PodSpec{
		InitContainers: []apiv1.Container{{Name: "init", Resources: apiv1.ResourceRequirements{
			Limits: apiv1.ResourceList{apiv1.ResourceMemory: q("1Gi")}}}},
		Containers: []apiv1.Container{{Name: "train", Resources: apiv1.ResourceRequirements{
			Limits:   apiv1.ResourceList{gpu: q("8"), apiv1.ResourceCPU: q("4")},
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: q("2")}}}},
		Resources: &apiv1.ResourceRequirements{
			Limits:   apiv1.ResourceList{apiv1.ResourceCPU: q("6"), apiv1.ResourceMemory: q("8Gi")},
			Requests: apiv1.ResourceList{apiv1.ResourceMemory: q("4Gi")}},
	}
	RequestsFromLimits(&spec)
	cases := []struct {
		name string
		got  apiv1.ResourceList
		res  apiv1.ResourceName
		want string
	}{
		{"container gpu from its limit", spec.Containers[0].Resources.Requests, gpu, "8"},
		{"container cpu explicit", spec.Containers[0].Resources.Requests, apiv1.ResourceCPU, "2"},
		{"init container memory from its limit", spec.InitContainers[0].Resources.Requests, apiv1.ResourceMemory, "1Gi"},
		{"pod-level cpu from its limit", spec.Resources.Requests, apiv1.ResourceCPU, "6"},
		{"pod-level memory explicit", spec.Resources.Requests, apiv1.ResourceMemory, "4Gi"},
	}
	for _, tc := range cases {
		if got, ok := tc.got[tc.res]; !ok || got.Cmp(q(tc.want)) != 0 {
			t.Errorf("%s: request %v, want %s", tc.name, got.String(), tc.want)
		}
	}

	// A spec without pod-level resources gets none.
	bare := apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c"}}}
	RequestsFromLimits(&bare)
	if bare.Resources != nil {
		t.Errorf("pod-level resources %+v made up", bare.Resources)
	}
}
