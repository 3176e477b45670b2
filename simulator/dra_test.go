package simulator

import (
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// draCluster returns a snapshot where gpu-1 publishes one NVIDIA GPU, cpu-1 none but has plenty
// of cpu and memory.
func draCluster(t *testing.T, pods []*apiv1.Pod, claims ...*resourceapi.ResourceClaim) *ClusterSnapshot {
	t.Helper()
	s := snapshotOf(t, []*apiv1.Node{Node("cpu-1", 16000, 64*GiB), Node("gpu-1", 8000, 32*GiB)}, pods)
	d := dra.NewSnapshot([]*resourceapi.ResourceSlice{NodeSlice("gpu-1", NvidiaDriver, 1)}, claims,
		[]*resourceapi.DeviceClass{DeviceClass("gpu.nvidia.com", NvidiaDriver)})
	if err := s.SetDRA(d); err != nil {
		t.Fatal(err)
	}
	return s
}

func allocatedDevices(c *resourceapi.ResourceClaim) []string {
	if c == nil || c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return out
}

func TestClaimsAreAllocatedWhenPodsArePlacedAndRevertUndoesIt(t *testing.T) {
	c := testChecker(t)
	s := draCluster(t, nil, Claim("c1", "gpu.nvidia.com", 1), Claim("c2", "gpu.nvidia.com", 1))
	p1 := WithClaim(Pod("p1", 100, MiB), "c1")
	p2 := WithClaim(Pod("p2", 100, MiB), "c2")

	s.Fork()
	scheduled, unschedulable, err := TrySchedulePods(c, s, []*apiv1.Pod{p1, p2})
	if err != nil {
		t.Fatal(err)
	}
	// Only one GPU: the first pod takes it, on the GPU node although the
	// CPU node comes first and has more room; the second fits nowhere.
	if len(scheduled) != 1 || scheduled[0].NodeName != "gpu-1" || len(unschedulable) != 1 || unschedulable[0].Name != "p2" {
		t.Fatalf("scheduled %v, unschedulable %d; want p1 on gpu-1 and p2 unschedulable", scheduled, len(unschedulable))
	}
	c1 := s.DRA().Claim("default", "c1")
	if got := allocatedDevices(c1); len(got) != 1 || got[0] != "gpu-1/gpu-0" {
		t.Errorf("c1 allocated %v, want gpu-1/gpu-0", got)
	}
	if len(c1.Status.ReservedFor) != 1 || c1.Status.ReservedFor[0].UID != p1.UID {
		t.Errorf("c1 reserved for %v, want p1", c1.Status.ReservedFor)
	}

	s.Revert()
	if got := allocatedDevices(s.DRA().Claim("default", "c1")); got != nil {
		t.Errorf("after Revert c1 is still allocated %v", got)
	}
	// The device is free again: the second pod gets it now.
	scheduled, _, err = TrySchedulePods(c, s, []*apiv1.Pod{p2})
	if err != nil || len(scheduled) != 1 || scheduled[0].NodeName != "gpu-1" {
		t.Fatalf("after Revert p2: scheduled %v (err %v), want gpu-1", scheduled, err)
	}
}

func TestSharedClaimIsAllocatedOnceAndPinsItsPods(t *testing.T) {
	c := testChecker(t)
	s := draCluster(t, nil, Claim("shared", "gpu.nvidia.com", 1))
	pods := []*apiv1.Pod{WithClaim(Pod("a", 100, MiB), "shared"), WithClaim(Pod("b", 100, MiB), "shared")}
	scheduled, unschedulable, err := TrySchedulePods(c, s, pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(scheduled) != 2 || len(unschedulable) != 0 {
		t.Fatalf("scheduled %d, unschedulable %d; want both pods placed (they share one device)", len(scheduled), len(unschedulable))
	}
	for _, sp := range scheduled {
		if sp.NodeName != "gpu-1" {
			t.Errorf("%s on %s, want gpu-1 (where the shared claim's device is)", sp.Pod.Name, sp.NodeName)
		}
	}
	shared := s.DRA().Claim("default", "shared")
	if len(allocatedDevices(shared)) != 1 || len(shared.Status.ReservedFor) != 2 {
		t.Errorf("shared claim: devices %v, reserved for %d pods; want 1 device, 2 pods", allocatedDevices(shared), len(shared.Status.ReservedFor))
	}
}

func TestAllocatedClaimPinsPodToItsDevice(t *testing.T) {
	c := testChecker(t)
	// The claim is allocated on gpu-1 already (its pod was deleted and
	// recreated, say): the pod can only go there.
	claim := Allocated(Claim("c1", "gpu.nvidia.com", 1), "gpu-1", NvidiaDriver, []string{"gpu-0"})
	s := draCluster(t, nil, claim)
	scheduled, _, err := TrySchedulePods(c, s, []*apiv1.Pod{WithClaim(Pod("p", 100, MiB), "c1")})
	if err != nil || len(scheduled) != 1 || scheduled[0].NodeName != "gpu-1" {
		t.Fatalf("scheduled %v (err %v), want p on gpu-1", scheduled, err)
	}
	if got := allocatedDevices(s.DRA().Claim("default", "c1")); len(got) != 1 || got[0] != "gpu-1/gpu-0" {
		t.Errorf("claim now allocated %v, want the same device gpu-1/gpu-0", got)
	}
}

func TestClaimFromTemplateNotCreatedYetIsSimulated(t *testing.T) {
	c := testChecker(t)
	s := draCluster(t, nil)
	tmpl := ClaimTemplate("one-gpu", "gpu.nvidia.com", 1)
	lookup := func(ns, name string) (*resourceapi.ResourceClaimTemplate, error) { return tmpl, nil }
	pending := []*apiv1.Pod{WithClaimTemplate(Pod("a", 100, MiB), "one-gpu"), WithClaimTemplate(Pod("b", 100, MiB), "one-gpu")}

	s.Fork()
	pods := s.DRA().WithTemplateClaims(pending, lookup)
	if len(pending[0].Status.ResourceClaimStatuses) != 0 {
		t.Fatalf("the caller's pod was changed")
	}
	scheduled, unschedulable, err := TrySchedulePods(c, s, pods)
	if err != nil {
		t.Fatal(err)
	}
	// Each pod has a claim of its own; there is one GPU.
	if len(scheduled) != 1 || scheduled[0].NodeName != "gpu-1" || len(unschedulable) != 1 {
		t.Fatalf("scheduled %v, unschedulable %d; want one pod on gpu-1, one left", scheduled, len(unschedulable))
	}
	s.Revert()
	if n := len(s.DRA().Claims()); n != 0 {
		t.Errorf("%d simulated claims left after Revert", n)
	}
}

func TestAdminAccessClaimDoesNotTakeTheDevice(t *testing.T) {
	c := testChecker(t)
	admin := Claim("monitor", "gpu.nvidia.com", 1)
	admin.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	taken := Allocated(Claim("train", "gpu.nvidia.com", 1), "gpu-1", NvidiaDriver, []string{"gpu-0"})
	s := draCluster(t, nil, admin, taken)
	scheduled, _, err := TrySchedulePods(c, s, []*apiv1.Pod{WithClaim(Pod("monitor", 100, MiB), "monitor")})
	if err != nil || len(scheduled) != 1 || scheduled[0].NodeName != "gpu-1" {
		t.Fatalf("admin-access pod: scheduled %v (err %v), want gpu-1 although its only device is taken", scheduled, err)
	}
}

func TestDevicesWithSharedCountersAreNotOverbooked(t *testing.T) {
	c := testChecker(t)
	// One GPU of 80Gi published as two 40Gi partitions and the whole GPU,
	// all consuming the same counter (DRAPartitionableDevices).
	// The counters are published in a slice of their own, as the API
	// wants, in the same pool.
	counters := NodeSlice("gpu-1", NvidiaDriver, 0)
	counters.Name += "-counters"
	counters.Spec.Pool.ResourceSliceCount = 2
	counters.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{"memory": {Value: resourceQty("80Gi")}}}}
	sl := NodeSlice("gpu-1", NvidiaDriver, 0)
	sl.Spec.Pool.ResourceSliceCount = 2
	part := func(name, mem string) resourceapi.Device {
		return resourceapi.Device{Name: name, ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
			CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{"memory": {Value: resourceQty(mem)}},
		}}}
	}
	sl.Spec.Devices = []resourceapi.Device{part("gpu-0-part-0", "40Gi"), part("gpu-0-part-1", "40Gi"), part("gpu-0", "80Gi")}

	s := snapshotOf(t, []*apiv1.Node{Node("gpu-1", 8000, 32*GiB)}, nil)
	claims := []*resourceapi.ResourceClaim{Claim("half", "gpu.nvidia.com", 1), Claim("whole", "gpu.nvidia.com", 1)}
	// "half" asks for two devices, "whole" for one.
	claims[0].Spec.Devices.Requests[0].Exactly.Count = 2
	if err := s.SetDRA(dra.NewSnapshot([]*resourceapi.ResourceSlice{counters, sl}, claims, []*resourceapi.DeviceClass{DeviceClass("gpu.nvidia.com", NvidiaDriver)})); err != nil {
		t.Fatal(err)
	}
	// Two devices: the allocator must pick the two partitions (the whole
	// GPU plus a partition would consume 120Gi of 80Gi).
	scheduled, _, err := TrySchedulePods(c, s, []*apiv1.Pod{WithClaim(Pod("half", 100, MiB), "half")})
	if err != nil || len(scheduled) != 1 {
		t.Fatalf("two-partition pod: scheduled %v (err %v)", scheduled, err)
	}
	if got := allocatedDevices(s.DRA().Claim("default", "half")); len(got) != 2 || got[0] == "gpu-1/gpu-0" || got[1] == "gpu-1/gpu-0" {
		t.Errorf("allocated %v, want the two partitions", got)
	}
	// The counter is used up: nothing is left for the whole GPU.
	_, unschedulable, err := TrySchedulePods(c, s, []*apiv1.Pod{WithClaim(Pod("whole", 100, MiB), "whole")})
	if err != nil || len(unschedulable) != 1 {
		t.Errorf("whole-GPU pod after both partitions were allocated: unschedulable %d (err %v), want 1", len(unschedulable), err)
	}
}

func TestRemovalMovesClaimPodOnlyWhereAnEquivalentDeviceIs(t *testing.T) {
	c := testChecker(t)
	now := time.Now()
	train := rsPod("train", 100, "gpu-1")
	train = WithClaim(train, "c1")
	claim := Allocated(Claim("c1", "gpu.nvidia.com", 1), "gpu-1", NvidiaDriver, []string{"gpu-0"}, train)

	t.Run("only a CPU node left", func(t *testing.T) {
		s := draCluster(t, []*apiv1.Pod{train}, claim)
		r := NewRemovalSimulator(c, s, defaultDrain)
		_, bad := r.SimulateNodeRemoval("gpu-1", nil, nil, now)
		if bad == nil || bad.Reason != NoPlaceToMovePods {
			t.Fatalf("gpu-1 holding the only GPU: %v, want NoPlaceToMovePods", bad)
		}
		// A failed simulation leaves the claim as it was.
		if got := allocatedDevices(s.DRA().Claim("default", "c1")); len(got) != 1 || got[0] != "gpu-1/gpu-0" {
			t.Errorf("claim after the failed simulation: %v, want still gpu-1/gpu-0", got)
		}
	})

	t.Run("a second GPU node with a free device", func(t *testing.T) {
		s := draCluster(t, []*apiv1.Pod{train}, claim)
		if err := s.AddNodeInfo(withSlices(Node("gpu-2", 8000, 32*GiB), NodeSlice("gpu-2", NvidiaDriver, 1))); err != nil {
			t.Fatal(err)
		}
		r := NewRemovalSimulator(c, s, defaultDrain)
		ok, bad := r.SimulateNodeRemoval("gpu-1", nil, nil, now)
		if bad != nil {
			t.Fatalf("gpu-1 should be removable onto gpu-2: %v", bad)
		}
		if len(ok.PodsToReschedule) != 1 {
			t.Errorf("pods to move %d, want 1", len(ok.PodsToReschedule))
		}
		if got := allocatedDevices(s.DRA().Claim("default", "c1")); len(got) != 1 || got[0] != "gpu-2/gpu-0" {
			t.Errorf("claim after the move: %v, want gpu-2/gpu-0", got)
		}
	})
}

func withSlices(n *apiv1.Node, sl ...*resourceapi.ResourceSlice) *framework.NodeInfo {
	ni := framework.NewNodeInfo(n)
	ni.SetResourceSlices(sl)
	return ni
}

func TestTemplateCopiesSlicesForEachNewNode(t *testing.T) {
	tmpl := withSlices(Node("template-gpu", 8000, 32*GiB), NodeSlice("gpu-1", NvidiaDriver, 2))
	a, err := SanitizedTemplateNodeInfo(tmpl, "a", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SanitizedTemplateNodeInfo(tmpl, "b", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := a.ResourceSlices(), b.ResourceSlices()
	if len(sa) != 1 || len(sb) != 1 {
		t.Fatalf("slices %d and %d, want 1 each", len(sa), len(sb))
	}
	if *sa[0].Spec.NodeName != a.Node().Name || sa[0].Spec.Pool.Name == sb[0].Spec.Pool.Name || sa[0].Name == sb[0].Name {
		t.Errorf("copies not made distinct: node %s pool %s/%s name %s/%s", *sa[0].Spec.NodeName, sa[0].Spec.Pool.Name, sb[0].Spec.Pool.Name, sa[0].Name, sb[0].Name)
	}
	if len(sa[0].Spec.Devices) != 2 || *tmpl.ResourceSlices()[0].Spec.NodeName != "gpu-1" {
		t.Errorf("devices %d, want 2; the template's slice must stay unchanged", len(sa[0].Spec.Devices))
	}

	// Two new nodes in one snapshot: each has a GPU a claim can take.
	c := testChecker(t)
	s := draCluster(t, nil, Claim("c1", "gpu.nvidia.com", 2), Claim("c2", "gpu.nvidia.com", 2))
	for _, ni := range []*framework.NodeInfo{a, b} {
		if err := s.AddNodeInfo(ni); err != nil {
			t.Fatal(err)
		}
	}
	scheduled, unschedulable, err := TrySchedulePods(c, s, []*apiv1.Pod{WithClaim(Pod("p1", 100, MiB), "c1"), WithClaim(Pod("p2", 100, MiB), "c2")})
	if err != nil || len(unschedulable) != 0 || scheduled[0].NodeName == scheduled[1].NodeName {
		t.Errorf("two 2-GPU pods on two 2-GPU template nodes: scheduled %v, unschedulable %d (err %v)", scheduled, len(unschedulable), err)
	}
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }

func TestClaimRejectionNamesTheClaimAndItsClass(t *testing.T) {
	c := testChecker(t)
	// An AMD claim in a cluster whose only device is NVIDIA's; both
	// drivers' classes exist.
	s := snapshotOf(t, []*apiv1.Node{Node("gpu-1", 8000, 32*GiB)}, nil)
	d := dra.NewSnapshot([]*resourceapi.ResourceSlice{NodeSlice("gpu-1", NvidiaDriver, 1)},
		[]*resourceapi.ResourceClaim{Claim("amd-claim", "gpu.amd.com", 1)},
		[]*resourceapi.DeviceClass{DeviceClass("gpu.nvidia.com", NvidiaDriver), DeviceClass("gpu.amd.com", "gpu.amd.com")})
	if err := s.SetDRA(d); err != nil {
		t.Fatal(err)
	}
	perr := c.CheckPredicates(s, WithClaim(Pod("p", 100, MiB), "amd-claim"), "gpu-1")
	if perr == nil {
		t.Fatal("the AMD claim fits the NVIDIA node")
	}
	reason := strings.Join(perr.Reasons(), "; ")
	t.Logf("reason: %s", reason)
	for _, want := range []string{"amd-claim", "class gpu.amd.com"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not name %q", reason, want)
		}
	}
}
