package utilization

import (
	"math"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

const gpu = apiv1.ResourceName("nvidia.com/gpu")

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCalculate(t *testing.T) {
	node := Node("n", 4000, 8*GiB)
	ds := OwnedBy(BoundPod("ds", 1000, 0, "n"), "DaemonSet", "agent", types.UID("ds"))
	mirror := BoundPod("static", 400, 0, "n")
	mirror.Annotations = map[string]string{drain.MirrorPodKey: "x"}
	done := BoundPod("done", 2000, 4*GiB, "n")
	done.Status.Phase = apiv1.PodSucceeded
	withInit := BoundPod("init", 100, GiB, "n")
	withInit.Spec.InitContainers = []apiv1.Container{{Name: "init", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
		apiv1.ResourceCPU: *resource.NewMilliQuantity(600, resource.DecimalSI)}}}}

	tests := []struct {
		name     string
		node     *apiv1.Node
		pods     []*apiv1.Pod
		skipDS   bool
		gpu      apiv1.ResourceName
		wantCPU  float64
		wantMem  float64
		wantUtil float64
		wantRes  apiv1.ResourceName
	}{
		{name: "empty node", node: node, wantRes: apiv1.ResourceCPU},
		{name: "cpu dominates", node: node, pods: []*apiv1.Pod{BoundPod("a", 2000, 2*GiB, "n")},
			wantCPU: 0.5, wantMem: 0.25, wantUtil: 0.5, wantRes: apiv1.ResourceCPU},
		{name: "memory dominates", node: node, pods: []*apiv1.Pod{BoundPod("a", 1000, 6*GiB, "n")},
			wantCPU: 0.25, wantMem: 0.75, wantUtil: 0.75, wantRes: apiv1.ResourceMemory},
		{name: "DaemonSet pods counted", node: node, pods: []*apiv1.Pod{BoundPod("a", 1000, 0, "n"), ds},
			wantCPU: 0.5, wantUtil: 0.5, wantRes: apiv1.ResourceCPU},
		{name: "DaemonSet pods skipped", node: node, pods: []*apiv1.Pod{BoundPod("a", 1000, 0, "n"), ds}, skipDS: true,
			wantCPU: 0.25, wantUtil: 0.25, wantRes: apiv1.ResourceCPU},
		{name: "mirror pods always counted", node: node, pods: []*apiv1.Pod{mirror}, skipDS: true,
			wantCPU: 0.1, wantUtil: 0.1, wantRes: apiv1.ResourceCPU},
		{name: "completed pods not counted", node: node, pods: []*apiv1.Pod{done},
			wantRes: apiv1.ResourceCPU},
		{name: "init container larger than the containers", node: node, pods: []*apiv1.Pod{withInit},
			wantCPU: 0.15, wantMem: 0.125, wantUtil: 0.15, wantRes: apiv1.ResourceCPU},
		{name: "gpu node uses gpu", node: WithGPU(Node("g", 4000, 8*GiB), gpu, 4),
			pods: []*apiv1.Pod{WithGPURequest(BoundPod("a", 3000, 6*GiB, "g"), gpu, 1)}, gpu: gpu,
			wantUtil: 0.25, wantRes: gpu},
		{name: "gpu asked for but node has none", node: node, pods: []*apiv1.Pod{BoundPod("a", 2000, 2*GiB, "n")}, gpu: gpu,
			wantCPU: 0.5, wantMem: 0.25, wantUtil: 0.5, wantRes: apiv1.ResourceCPU},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := Calculate(framework.NewNodeInfo(tc.node, tc.pods...), tc.skipDS, tc.gpu)
			if err != nil {
				t.Fatal(err)
			}
			if !near(info.Utilization, tc.wantUtil) || info.ResourceName != tc.wantRes {
				t.Errorf("utilization %v of %s, want %v of %s", info.Utilization, info.ResourceName, tc.wantUtil, tc.wantRes)
			}
			if tc.wantRes != gpu && (!near(info.CpuUtil, tc.wantCPU) || !near(info.MemUtil, tc.wantMem)) {
				t.Errorf("cpu %v mem %v, want %v %v", info.CpuUtil, info.MemUtil, tc.wantCPU, tc.wantMem)
			}
			if tc.wantRes == gpu && !near(info.GpuUtil, tc.wantUtil) {
				t.Errorf("gpu util %v", info.GpuUtil)
			}
		})
	}
}

func TestCalculateErrors(t *testing.T) {
	n := Node("n", 4000, 8*GiB)
	delete(n.Status.Allocatable, apiv1.ResourceCPU)
	if _, err := Calculate(framework.NewNodeInfo(n), false, ""); err == nil {
		t.Errorf("a node without allocatable cpu must be an error")
	}
	if _, err := Calculate(nil, false, ""); err == nil {
		t.Errorf("nil node info must be an error")
	}
}
