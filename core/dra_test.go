package core

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// gpuCluster returns group "cpu" with one 8-cpu node, group "gpu" (min 0) with
// one node gpu-n0 whose DRA driver published devices GPUs; both provider
// templates carry no slices (DOKS's templates from a pool spec do not
// know the devices). A training pod on gpu-n0 holds one GPU through its
// claim.
func gpuCluster(devices int) (*test.Provider, []runtime.Object) {
	p, objs := cluster(
		groupSpec{id: "cpu", min: 1, max: 5, nodes: 1, milliCPU: 8000, mem: 32 * test.GiB},
		groupSpec{id: "gpu", min: 0, max: 5, nodes: 1, milliCPU: 8000, mem: 32 * test.GiB},
	)
	train := WithClaim(test.BuildScheduledPod("train", 500, test.GiB, "rs-train", "gpu-n0"), "train-gpu")
	claim := Allocated(Claim("train-gpu", "gpu.nvidia.com", 1), "gpu-n0", NvidiaDriver, []string{"gpu-0"}, train)
	return p, append(objs, train, claim, NodeSlice("gpu-n0", NvidiaDriver, devices), DeviceClass("gpu.nvidia.com", NvidiaDriver))
}

// keptPastUnneededTime runs gpuCluster(devices) past the unneeded time,
// checks that no node was removed, and returns the metrics.
func keptPastUnneededTime(t *testing.T, devices int) func(string, map[string]string) float64 {
	t.Helper()
	p, objs := gpuCluster(devices)
	h := newHarness(t, testOptions(), p, objs...)
	read := scrape(t)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if d := sdtest.Deletions(p); len(d) != 0 {
		t.Fatalf("deleted %v; the training pod's device exists on no other node", d)
	}
	return read
}

// The GPU node whose only device a pod holds is fully used, whatever its
// cpu: it is not a scale-down candidate (upstream's DRA utilization).
func TestGPUNodeWithItsOnlyDeviceClaimedIsNotRemoved(t *testing.T) {
	read := keptPastUnneededTime(t, 1)
	// Reason 11: NotUnderutilized (the cpu node too: it runs the cluster).
	if got := read("unremovable_nodes_count", map[string]string{"reason": "11"}); got < 1 {
		t.Fatalf("unremovable_nodes_count{reason=NotUnderutilized} = %v, want the GPU node counted", got)
	}
}

// A GPU node with devices to spare is a candidate, but its claim pod has
// nowhere to go: no other node publishes an equivalent device, and the
// CPU node's room does not count.
func TestClaimPodWithNoOtherDeviceKeepsItsNode(t *testing.T) {
	read := keptPastUnneededTime(t, 4)
	if got := read("unremovable_nodes_count", map[string]string{"reason": "14"}); got != 1 {
		t.Fatalf("unremovable_nodes_count{reason=NoPlaceToMovePods} = %v, want 1 (the GPU node)", got)
	}
}

// A pending pod claiming a GPU grows the GPU group (its template from the
// ready GPU node, slices included), not the CPU group, though the CPU node
// has room for its cpu and memory.
func TestClaimPodScalesUpTheGPUGroup(t *testing.T) {
	p, objs := gpuCluster(1)
	second := WithClaimTemplate(test.BuildPendingPod("second", 500, test.GiB, "rs-second"), "one-gpu")
	objs = append(objs, second, ClaimTemplate("one-gpu", "gpu.nvidia.com", 1))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"gpu+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [gpu+1]", got)
	}
	// The new node is upcoming: the next loop asks for nothing more.
	h.runOnce(t0.Add(30 * time.Second))
	if got := increases(p); len(got) != 1 {
		t.Fatalf("IncreaseSize calls = %v, want one scale-up only", got)
	}
}

// A claim no group's devices can satisfy (an AMD class; only NVIDIA GPUs
// here) triggers no scale-up, and the pod is told so.
func TestClaimNoTemplateCanSatisfy(t *testing.T) {
	p, objs := gpuCluster(1)
	amd := WithClaim(test.BuildPendingPod("amd", 500, test.GiB, "rs-amd"), "amd-gpu")
	objs = append(objs, amd, Claim("amd-gpu", "gpu.amd.com", 1), DeviceClass("gpu.amd.com", "gpu.amd.com"))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Second))
	if got := increases(p); len(got) != 0 {
		t.Fatalf("IncreaseSize calls = %v, want none", got)
	}
	ev := h.events()
	if n := countEvents(ev, "NotTriggerScaleUp pod didn't trigger scale-up: 2 cannot allocate all claims"); n != 1 {
		t.Fatalf("NotTriggerScaleUp events naming the claim = %d, want 1: %v", n, ev)
	}
}
