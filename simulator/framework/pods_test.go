package framework

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func req(cpu, mem string) apiv1.ResourceRequirements {
	return apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
		apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(mem)}}
}

func TestPodRequests(t *testing.T) {
	always := apiv1.ContainerRestartPolicyAlways
	cases := []struct {
		name     string
		spec     apiv1.PodSpec
		cpuMilli int64
		memMi    int64
	}{
		{"containers add up", apiv1.PodSpec{Containers: []apiv1.Container{{Resources: req("100m", "64Mi")}, {Resources: req("200m", "128Mi")}}}, 300, 192},
		{"large init container wins", apiv1.PodSpec{
			Containers:     []apiv1.Container{{Resources: req("100m", "64Mi")}},
			InitContainers: []apiv1.Container{{Resources: req("1", "32Mi")}}}, 1000, 64},
		{"sidecar adds", apiv1.PodSpec{
			Containers:     []apiv1.Container{{Resources: req("100m", "64Mi")}},
			InitContainers: []apiv1.Container{{Resources: req("50m", "16Mi"), RestartPolicy: &always}}}, 150, 80},
		// The scheduler starts init containers in order: one declared after
		// a sidecar runs while the sidecar does, so both count at that peak.
		{"init container after a sidecar runs beside it", apiv1.PodSpec{
			Containers: []apiv1.Container{{Resources: req("100m", "64Mi")}},
			InitContainers: []apiv1.Container{
				{Resources: req("500m", "256Mi"), RestartPolicy: &always},
				{Resources: req("2", "128Mi")}}}, 2500, 384},
		{"overhead adds", apiv1.PodSpec{
			Containers: []apiv1.Container{{Resources: req("100m", "64Mi")}},
			Overhead:   apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("10m")}}, 110, 64},
		{"no requests", apiv1.PodSpec{Containers: []apiv1.Container{{}}}, 0, 0},
	}
	for _, c := range cases {
		got := PodRequests(&apiv1.Pod{Spec: c.spec})
		if got.Cpu().MilliValue() != c.cpuMilli || got.Memory().Value() != c.memMi<<20 {
			t.Errorf("%s: cpu %dm mem %d, want %dm %dMi", c.name, got.Cpu().MilliValue(), got.Memory().Value(), c.cpuMilli, c.memMi)
		}
	}
}

func TestPodNames(t *testing.T) {
	pods := make([]*apiv1.Pod, 7)
	for i := range pods {
		pods[i] = &apiv1.Pod{}
		pods[i].Namespace, pods[i].Name = "ns", string(rune('a'+i))
	}
	cases := []struct {
		name  string
		pods  []*apiv1.Pod
		limit int
		want  string
	}{
		{"no pods", nil, 5, "none"},
		{"under the limit", pods[:2], 5, "ns/a, ns/b"},
		{"at the limit", pods[:5], 5, "ns/a, ns/b, ns/c, ns/d, ns/e"},
		{"over the limit", pods, 5, "ns/a, ns/b, ns/c, ns/d, ns/e and 2 more"},
		{"no limit", pods, 0, "ns/a, ns/b, ns/c, ns/d, ns/e, ns/f, ns/g"},
	}
	for _, c := range cases {
		if got := PodNames(c.pods, c.limit); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
