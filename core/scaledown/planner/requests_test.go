package planner

import (
	"math"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// The cached utilization must agree with utilization.Calculate, or nodes
// would be kept or simulated by mistake, and reported with other figures.
func TestRequestsCacheMatchesCalculate(t *testing.T) {
	node := test.BuildNode("n", 4000, 8*test.GiB)
	plain := test.BuildScheduledPod("plain", 1000, test.GiB, "rs", "n")
	withInit := test.BuildScheduledPod("init", 100, test.GiB, "rs", "n")
	withInit.Spec.InitContainers = []apiv1.Container{{Name: "i", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
		apiv1.ResourceCPU: *resource.NewMilliQuantity(1500, resource.DecimalSI)}}}}
	always := apiv1.ContainerRestartPolicyAlways
	withSidecar := test.BuildScheduledPod("sidecar", 100, test.GiB, "rs", "n")
	withSidecar.Spec.InitContainers = []apiv1.Container{
		{Name: "proxy", RestartPolicy: &always, Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
			apiv1.ResourceCPU: *resource.NewMilliQuantity(500, resource.DecimalSI)}}},
		{Name: "migrate", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
			apiv1.ResourceCPU: *resource.NewMilliQuantity(2000, resource.DecimalSI)}}}}
	withOverhead := test.BuildScheduledPod("overhead", 500, 2*test.GiB, "rs", "n")
	withOverhead.Spec.Overhead = apiv1.ResourceList{apiv1.ResourceMemory: *resource.NewQuantity(test.GiB, resource.BinarySI)}
	ds := test.BuildDaemonSetPod("ds", 700, test.GiB, "agent", "n")
	mirror := test.BuildScheduledPod("static", 300, 0, "", "n")
	mirror.Annotations = map[string]string{drain.MirrorPodKey: "x"}
	done := test.BuildScheduledPod("done", 3000, 6*test.GiB, "rs", "n")
	done.Status.Phase = apiv1.PodSucceeded

	sets := map[string][]*apiv1.Pod{
		"empty":         nil,
		"plain":         {plain},
		"init":          {withInit},
		"sidecar":       {withSidecar},
		"overhead":      {withOverhead},
		"daemonset":     {plain, ds},
		"mirror":        {mirror, ds},
		"completed pod": {plain, done},
	}
	c := utilization.NewRequestsCache()
	for name, pods := range sets {
		for _, skipDS := range []bool{false, true} {
			want, err := utilization.Calculate(framework.NewNodeInfo(node, pods...), skipDS, "")
			if err != nil {
				t.Fatal(err)
			}
			for round := 0; round < 2; round++ { // second round from the cache
				got, err := podUtilization(c, node, pods, skipDS)
				if err != nil || math.Abs(got.Utilization-want.Utilization) > 1e-9 || got.ResourceName != want.ResourceName ||
					math.Abs(got.CpuUtil-want.CpuUtil) > 1e-9 || math.Abs(got.MemUtil-want.MemUtil) > 1e-9 {
					t.Errorf("%s (skipDS=%v, round %d): cached %+v (err %v), Calculate %+v", name, skipDS, round, got, err, want)
				}
			}
		}
	}
	// Entries of pods no longer looked at go away.
	c.Sweep()
	c.Sweep()
	if c.Len() != 0 {
		t.Fatalf("%d stale entries", c.Len())
	}
}
