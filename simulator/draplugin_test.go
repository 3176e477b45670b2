package simulator

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestMayNeedDevices(t *testing.T) {
	list := func(name string) apiv1.ResourceList {
		return apiv1.ResourceList{apiv1.ResourceName(name): resource.MustParse("1")}
	}
	cases := []struct {
		name string
		spec apiv1.PodSpec
		want bool
	}{
		{"cpu and memory only", apiv1.PodSpec{Containers: []apiv1.Container{{Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"), apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}, false},
		{"hugepages and ephemeral storage", apiv1.PodSpec{Containers: []apiv1.Container{{Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi"), apiv1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}}}}, false},
		{"a resource claim", apiv1.PodSpec{ResourceClaims: []apiv1.PodResourceClaim{{Name: "gpu"}}}, true},
		{"an extended resource request", apiv1.PodSpec{Containers: []apiv1.Container{{Resources: apiv1.ResourceRequirements{Requests: list("nvidia.com/gpu")}}}}, true},
		{"an extended resource limit only", apiv1.PodSpec{Containers: []apiv1.Container{{Resources: apiv1.ResourceRequirements{Limits: list("amd.com/gpu")}}}}, true},
		{"in an init container", apiv1.PodSpec{InitContainers: []apiv1.Container{{Resources: apiv1.ResourceRequirements{Requests: list("nvidia.com/gpu")}}}}, true},
		{"a device class resource", apiv1.PodSpec{Containers: []apiv1.Container{{Resources: apiv1.ResourceRequirements{
			Requests: list("deviceclass.resource.kubernetes.io/gpu.nvidia.com")}}}}, true},
		{"pod-level resources", apiv1.PodSpec{Resources: &apiv1.ResourceRequirements{Requests: list("nvidia.com/gpu")}}, true},
	}
	for _, c := range cases {
		if got := mayNeedDevices(&apiv1.Pod{Spec: c.spec}); got != c.want {
			t.Errorf("%s: mayNeedDevices = %v, want %v", c.name, got, c.want)
		}
	}
}
