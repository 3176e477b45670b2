package dra

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

func TestExtendedResourceClass(t *testing.T) {
	older := ExtendedResourceClass("gpu-old", NvidiaDriver, "nvidia.com/gpu")
	older.CreationTimestamp = metav1.NewTime(time.Unix(1000, 0))
	newer := ExtendedResourceClass("gpu-new", NvidiaDriver, "nvidia.com/gpu")
	newer.CreationTimestamp = metav1.NewTime(time.Unix(2000, 0))
	twinA := ExtendedResourceClass("a-twin", NvidiaDriver, "example.com/twin")
	twinB := ExtendedResourceClass("b-twin", NvidiaDriver, "example.com/twin")
	plain := DeviceClass("plain", NvidiaDriver)
	s := NewSnapshot(nil, nil, []*resourceapi.DeviceClass{older, newer, twinB, twinA, plain})
	for _, tc := range []struct {
		resource apiv1.ResourceName
		want     string
	}{
		{"nvidia.com/gpu", "gpu-new"},  // a migration: the newer class serves it
		{"example.com/twin", "a-twin"}, // created together: the lower name
		{"deviceclass.resource.kubernetes.io/plain", "plain"},
		{"deviceclass.resource.kubernetes.io/gpu-old", "gpu-old"},
		{"deviceclass.resource.kubernetes.io/missing", ""},
		{"amd.com/gpu", ""}, // a device plugin's
		{"cpu", ""},
	} {
		got := ""
		if c := s.ExtendedResourceClass(tc.resource); c != nil {
			got = c.Name
		}
		if got != tc.want {
			t.Errorf("%s: served by %q, want %q", tc.resource, got, tc.want)
		}
	}
}

func TestServesExtendedResources(t *testing.T) {
	s := NewSnapshot(nil, nil, []*resourceapi.DeviceClass{ExtendedResourceClass("gpu.nvidia.com", NvidiaDriver, "nvidia.com/gpu")})
	none := NewSnapshot(nil, nil, nil)
	initGPU := Pod("init", 100, MiB)
	initGPU.Spec.InitContainers = []apiv1.Container{{Name: "i", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{"nvidia.com/gpu": resourceQuantity(1)}}}}
	podLevel := Pod("pod-level", 100, MiB)
	podLevel.Spec.Resources = &apiv1.ResourceRequirements{Requests: apiv1.ResourceList{"nvidia.com/gpu": resourceQuantity(1)}}
	for _, tc := range []struct {
		name string
		snap *Snapshot
		pod  *apiv1.Pod
		want bool
	}{
		{"nvidia.com/gpu, served", s, WithGPURequest(Pod("a", 100, MiB), "nvidia.com/gpu", 1), true},
		{"the class's implicit name", s, WithGPURequest(Pod("a", 100, MiB), "deviceclass.resource.kubernetes.io/gpu.nvidia.com", 1), true},
		{"in an init container", s, initGPU, true},
		{"pod-level resources", s, podLevel, true},
		{"zero asked", s, WithGPURequest(Pod("a", 100, MiB), "nvidia.com/gpu", 0), false},
		{"another vendor's", s, WithGPURequest(Pod("a", 100, MiB), "amd.com/gpu", 1), false},
		{"cpu and memory only", s, Pod("a", 100, MiB), false},
		{"no class at all", none, WithGPURequest(Pod("a", 100, MiB), "nvidia.com/gpu", 1), false},
	} {
		if got := tc.snap.ServesExtendedResources(tc.pod); got != tc.want {
			t.Errorf("%s: ServesExtendedResources = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A running pod's devices are found through the claim its
// status.extendedResourceClaimStatus names: its node is as used as that
// claim makes it.
func TestUtilizationCountsDevicesHeldThroughExtendedResources(t *testing.T) {
	class := ExtendedResourceClass("gpu.nvidia.com", NvidiaDriver, "nvidia.com/gpu")
	train := WithGPURequest(BoundPod("train", 100, MiB, "gpu-1"), "nvidia.com/gpu", 1)
	idle := BoundPod("idle", 100, MiB, "gpu-1")
	claim := ExtendedResourceClaim(train, class, "gpu-1", NvidiaDriver, []string{"gpu-0"})
	slices := []*resourceapi.ResourceSlice{NodeSlice("gpu-1", NvidiaDriver, 2)}
	s := NewSnapshot(slices, []*resourceapi.ResourceClaim{claim}, []*resourceapi.DeviceClass{class})

	claims := s.PodsClaims([]*apiv1.Pod{train, idle})
	if len(claims) != 1 || claims[0] != claim {
		t.Fatalf("PodsClaims = %d claims, want the training pod's", len(claims))
	}
	u, ok, err := HighestUtilization(s.NodeSlices("gpu-1"), claims)
	if err != nil || !ok || u.Utilization != 0.5 {
		t.Fatalf("utilization %v (ok %v, err %v), want 0.5: one of two GPUs held", u.Utilization, ok, err)
	}
}

// The removal simulation takes a moved pod off its claims: the claim made
// for its extended resources goes, as the garbage collector deletes it with
// the pod, and Revert brings it back.
func TestUnreserveDeletesTheExtendedResourceClaim(t *testing.T) {
	class := ExtendedResourceClass("gpu.nvidia.com", NvidiaDriver, "nvidia.com/gpu")
	train := WithGPURequest(BoundPod("train", 100, MiB, "gpu-1"), "nvidia.com/gpu", 1)
	claim := ExtendedResourceClaim(train, class, "gpu-1", NvidiaDriver, []string{"gpu-0"})
	s := NewSnapshot(nil, []*resourceapi.ResourceClaim{claim}, []*resourceapi.DeviceClass{class})
	s.Fork()
	s.UnreservePodClaims(train)
	if s.Claim("default", claim.Name) != nil {
		t.Fatal("the moved pod's extended resource claim is still there")
	}
	s.Revert()
	if s.Claim("default", claim.Name) != claim {
		t.Fatal("Revert did not bring the claim back")
	}
}

func resourceQuantity(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
