package core

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// gpuExtendedCluster is gpuCluster where NVIDIA's class serves
// nvidia.com/gpu (spec.extendedResourceName, as its chart sets it) and the
// training pod asks for nvidia.com/gpu: 1 instead of a claim: it holds
// gpu-n0's device through the claim the scheduler made for it and named
// in its status.extendedResourceClaimStatus.
func gpuExtendedCluster(devices int) (*test.Provider, []runtime.Object) {
	p, objs := cluster(
		groupSpec{id: "cpu", min: 1, max: 5, nodes: 1, milliCPU: 8000, mem: 32 * test.GiB},
		groupSpec{id: "gpu", min: 0, max: 5, nodes: 1, milliCPU: 8000, mem: 32 * test.GiB},
	)
	class := ExtendedResourceClass("gpu.nvidia.com", NvidiaDriver, "nvidia.com/gpu")
	train := WithGPURequest(test.BuildScheduledPod("train", 500, test.GiB, "rs-train", "gpu-n0"), "nvidia.com/gpu", 1)
	claim := ExtendedResourceClaim(train, class, "gpu-n0", NvidiaDriver, []string{"gpu-0"})
	return p, append(objs, train, claim, NodeSlice("gpu-n0", NvidiaDriver, devices), class)
}

// Pending pods asking for nvidia.com/gpu: 1 each, with gpu-n0's only GPU
// taken, get one new 1-GPU node each: the simulation gives each its own
// device, as the scheduler will.
func TestExtendedResourcePodsGetAGPUNodeEach(t *testing.T) {
	p, objs := gpuExtendedCluster(1)
	for i := 0; i < 3; i++ {
		objs = append(objs, WithGPURequest(test.BuildPendingPod(fmt.Sprintf("infer-%d", i), 500, test.GiB, "rs-infer"), "nvidia.com/gpu", 1))
	}
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"gpu+3"}) {
		t.Fatalf("IncreaseSize calls = %v, want [gpu+3]", got)
	}
	// The three new nodes are upcoming, one device each: nothing more.
	h.runOnce(t0.Add(30 * time.Second))
	if got := increases(p); len(got) != 1 {
		t.Fatalf("IncreaseSize calls = %v, want one scale-up only", got)
	}
}

// A GPU node whose only device a running pod holds through its
// status.extendedResourceClaimStatus is fully used, whatever its cpu.
func TestGPUNodeHeldThroughExtendedResourceIsNotRemoved(t *testing.T) {
	p, objs := gpuExtendedCluster(1)
	h := newHarness(t, testOptions(), p, objs...)
	read := scrape(t)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if d := sdtest.Deletions(p); len(d) != 0 {
		t.Fatalf("deleted %v; the training pod holds gpu-n0's only GPU", d)
	}
	// Reason 11: NotUnderutilized, judged before any move is simulated.
	if got := read("unremovable_nodes_count", map[string]string{"reason": "11"}); got != 1 {
		t.Fatalf("unremovable_nodes_count{reason=NotUnderutilized} = %v, want 1 (the GPU node)", got)
	}
}
