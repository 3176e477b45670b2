package simulator

import (
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// gpuClass is NVIDIA's DeviceClass as its chart installs it: it serves
// pods asking for nvidia.com/gpu from the driver's devices.
var gpuClass = ExtendedResourceClass("gpu.nvidia.com", NvidiaDriver, "nvidia.com/gpu")

// gpuPod asks for n nvidia.com/gpu, no ResourceClaim.
func gpuPod(name string, n int64) *apiv1.Pod {
	return WithGPURequest(Pod(name, 100, MiB), "nvidia.com/gpu", n)
}

// extendedCluster is draCluster with NVIDIA's class mapping nvidia.com/gpu
// and nodes gpu-i publishing devices[i] GPUs each.
func extendedCluster(t *testing.T, pods []*apiv1.Pod, claims []*resourceapi.ResourceClaim, devices ...int) *ClusterSnapshot {
	t.Helper()
	nodes := []*apiv1.Node{Node("cpu-1", 16000, 64*GiB)}
	var slices []*resourceapi.ResourceSlice
	for i, n := range devices {
		name := "gpu-" + string(rune('1'+i))
		nodes = append(nodes, Node(name, 8000, 32*GiB))
		slices = append(slices, NodeSlice(name, NvidiaDriver, n))
	}
	s := snapshotOf(t, nodes, pods)
	if err := s.SetDRA(dra.NewSnapshot(slices, claims, []*resourceapi.DeviceClass{gpuClass})); err != nil {
		t.Fatal(err)
	}
	return s
}

// The scheduler serves nvidia.com/gpu from the class's devices and creates
// a claim for the pod: three pods asking for one GPU each get one 1-GPU
// node's device between them, not one each.
func TestExtendedResourcePodsTakeOneDeviceEach(t *testing.T) {
	c := testChecker(t)
	s := extendedCluster(t, nil, nil, 1)
	pods := []*apiv1.Pod{gpuPod("a", 1), gpuPod("b", 1), gpuPod("c", 1)}

	s.Fork()
	scheduled, unschedulable, err := TrySchedulePods(c, s, pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(scheduled) != 1 || scheduled[0].NodeName != "gpu-1" || len(unschedulable) != 2 {
		t.Fatalf("scheduled %s, unschedulable %d; want one pod on gpu-1 and two left", placements(scheduled), len(unschedulable))
	}
	if pods[0].Status.ExtendedResourceClaimStatus != nil {
		t.Errorf("the caller's pod was changed")
	}
	ni, err := s.GetNodeInfo("gpu-1")
	if err != nil {
		t.Fatal(err)
	}
	placed := ni.Pods()[0]
	st := placed.Status.ExtendedResourceClaimStatus
	if st == nil {
		t.Fatal("the placed pod names no extended resource claim")
	}
	claim := s.DRA().Claim("default", st.ResourceClaimName)
	if got := allocatedDevices(claim); len(got) != 1 || got[0] != "gpu-1/gpu-0" {
		t.Errorf("the pod's claim %s is allocated %v, want gpu-1/gpu-0", st.ResourceClaimName, got)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != placed.UID {
		t.Errorf("the claim is reserved for %v, want the pod", claim.Status.ReservedFor)
	}

	// The allocation goes with the fork: the device is free again.
	s.Revert()
	if n := len(s.DRA().Claims()); n != 0 {
		t.Errorf("%d claims left after Revert, want none", n)
	}
	scheduled, _, err = TrySchedulePods(c, s, pods[1:2])
	if err != nil || len(scheduled) != 1 || scheduled[0].NodeName != "gpu-1" {
		t.Fatalf("after Revert: scheduled %s (err %v), want b on gpu-1", placements(scheduled), err)
	}
}

// A pod asking for two GPUs takes two devices: it fits a 2-GPU node once.
func TestExtendedResourceCountTakesThatManyDevices(t *testing.T) {
	c := testChecker(t)
	s := extendedCluster(t, nil, nil, 3)
	scheduled, unschedulable, err := TrySchedulePods(c, s, []*apiv1.Pod{gpuPod("a", 2), gpuPod("b", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(scheduled) != 1 || len(unschedulable) != 1 {
		t.Fatalf("scheduled %s, unschedulable %d; want one 2-GPU pod on the 3-GPU node", placements(scheduled), len(unschedulable))
	}
	ni, _ := s.GetNodeInfo("gpu-1")
	claim := s.DRA().Claim("default", ni.Pods()[0].Status.ExtendedResourceClaimStatus.ResourceClaimName)
	if got := allocatedDevices(claim); len(got) != 2 {
		t.Errorf("allocated %v, want two devices", got)
	}
}

// A node whose device plugin advertises nvidia.com/gpu serves the pod from
// its allocatable, as the scheduler does: no claim is made.
func TestExtendedResourceFromTheDevicePluginMakesNoClaim(t *testing.T) {
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{WithGPU(Node("plugin-1", 8000, 32*GiB), "nvidia.com/gpu", 1)}, nil)
	if err := s.SetDRA(dra.NewSnapshot(nil, nil, []*resourceapi.DeviceClass{gpuClass})); err != nil {
		t.Fatal(err)
	}
	scheduled, unschedulable, err := TrySchedulePods(c, s, []*apiv1.Pod{gpuPod("a", 1), gpuPod("b", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(scheduled) != 1 || len(unschedulable) != 1 {
		t.Fatalf("scheduled %s, unschedulable %d; want one pod on the plugin's one GPU", placements(scheduled), len(unschedulable))
	}
	if n := len(s.DRA().Claims()); n != 0 {
		t.Errorf("%d claims made for a device plugin's GPU, want none", n)
	}
}

// A running pod holds its device through the claim its
// status.extendedResourceClaimStatus names. Removing its node moves it
// only where a device is free, and two evicted pods do not share one.
func TestRemovalMovesExtendedResourcePodsOntoFreeDevicesOnly(t *testing.T) {
	c := testChecker(t)
	now := time.Now()
	running := func() ([]*apiv1.Pod, []*resourceapi.ResourceClaim) {
		a := WithGPURequest(rsPod("train-a", 100, "gpu-1"), "nvidia.com/gpu", 1)
		b := WithGPURequest(rsPod("train-b", 100, "gpu-1"), "nvidia.com/gpu", 1)
		held := WithGPURequest(rsPod("held", 100, "gpu-2"), "nvidia.com/gpu", 1)
		return []*apiv1.Pod{a, b, held}, []*resourceapi.ResourceClaim{
			ExtendedResourceClaim(a, gpuClass, "gpu-1", NvidiaDriver, []string{"gpu-0"}),
			ExtendedResourceClaim(b, gpuClass, "gpu-1", NvidiaDriver, []string{"gpu-1"}),
			ExtendedResourceClaim(held, gpuClass, "gpu-2", NvidiaDriver, []string{"gpu-0"}),
		}
	}

	t.Run("one free device for two pods", func(t *testing.T) {
		pods, claims := running()
		s := extendedCluster(t, pods, claims, 2, 2)
		r := NewRemovalSimulator(c, s, defaultDrain)
		_, bad := r.SimulateNodeRemoval("gpu-1", nil, nil, now)
		if bad == nil || bad.Reason != NoPlaceToMovePods {
			t.Fatalf("gpu-1's two GPU pods and gpu-2's one free GPU: %v, want NoPlaceToMovePods", bad)
		}
		for _, name := range []string{claims[0].Name, claims[1].Name} {
			if got := allocatedDevices(s.DRA().Claim("default", name)); len(got) != 1 {
				t.Errorf("claim %s after the failed simulation: %v, want its device still held", name, got)
			}
		}
	})

	t.Run("two free devices", func(t *testing.T) {
		pods, claims := running()
		s := extendedCluster(t, pods, claims, 2, 3)
		r := NewRemovalSimulator(c, s, defaultDrain)
		ok, bad := r.SimulateNodeRemoval("gpu-1", nil, nil, now)
		if bad != nil {
			t.Fatalf("gpu-2 has two free GPUs for gpu-1's two pods: %v", bad)
		}
		if len(ok.Destinations) != 2 || ok.Destinations[0] != "gpu-2" || ok.Destinations[1] != "gpu-2" {
			t.Fatalf("destinations %v, want both on gpu-2", ok.Destinations)
		}
		ni, _ := s.GetNodeInfo("gpu-2")
		taken := map[string]bool{}
		for _, p := range ni.Pods() {
			st := p.Status.ExtendedResourceClaimStatus
			if st == nil {
				t.Fatalf("pod %s on gpu-2 names no claim", p.Name)
			}
			for _, d := range allocatedDevices(s.DRA().Claim("default", st.ResourceClaimName)) {
				if taken[d] {
					t.Errorf("device %s given to two pods", d)
				}
				taken[d] = true
			}
		}
		if len(taken) != 3 {
			t.Errorf("devices held on gpu-2: %v, want all three", taken)
		}
	})
}

// placements names each scheduled pod and its node.
func placements(scheduled []ScheduledPod) string {
	out := make([]string, 0, len(scheduled))
	for _, sp := range scheduled {
		out = append(out, sp.Pod.Name+"@"+sp.NodeName)
	}
	return "[" + strings.Join(out, " ") + "]"
}
