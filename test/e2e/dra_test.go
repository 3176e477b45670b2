package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// nvidiaGPU is the extended resource NVIDIA's device plugin advertises and its DRA
// driver's DeviceClass serves.
const nvidiaGPU apiv1.ResourceName = "nvidia.com/gpu"

// GPU sizes of the DRA scenarios: one H100, eight H100s.
const (
	h100x1 = "gpu-h100x1-80gb"
	h100x8 = "gpu-h100x8-640gb"
)

func gpuPool(name, size string, count, max int) doks.PoolSpec {
	return doks.PoolSpec{Name: name, Size: size, Count: count, AutoScale: true, MinNodes: 0, MaxNodes: max}
}

// claimTemplate creates a ResourceClaimTemplate asking for count devices of class.
func (s *scenario) claimTemplate(name, class string, count int64) {
	s.t.Helper()
	_, err := s.kube.ResourceV1().ResourceClaimTemplates(s.ns).Create(s.ctx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
			}}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
}

// claiming makes a pod template claim its devices from the named ResourceClaimTemplate.
func claiming(template string) func(*apiv1.PodSpec) {
	return func(spec *apiv1.PodSpec) {
		spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}}
		spec.Containers[0].Resources.Claims = []apiv1.ResourceClaim{{Name: "gpus"}}
	}
}

// withClaim makes the Deployment's pods claim their devices from template.
func withClaim(template string) deployOption {
	return func(d *appsv1.Deployment) { claiming(template)(&d.Spec.Template.Spec) }
}

// (b), (e) and (a) of issue 17 in one cluster: a CPU node with room and a GPU pool at
// zero, on a cluster running NVIDIA's DRA driver. A pod claiming a GPU grows the GPU pool
// from zero (its template carries the driver's slice); while the new node is Ready but its
// driver has not published the slice yet, no second droplet is asked for; once it has, the
// pod runs there. The GPU node then holds the only device: it is not removed although the
// CPU node has room for the pod's CPU. A second claim pod grows the pool again and runs.
func TestDRAClaimPodGrowsGPUPoolFromZeroAndKeepsItsNode(t *testing.T) {
	s := newScenario(t, scenarioOptions{
		pools: []doks.PoolSpec{
			{Name: "cpu", Size: "s-4vcpu-8gb", Count: 1},
			gpuPool("gpu", h100x1, 0, 3),
		},
		bootDelay: time.Second,
		agent:     nodeagent.Options{DRADrivers: []string{gpudriver.NVIDIA}},
	})
	s.sb.Agent.HoldSlices("gpu")
	s.claimTemplate("one-gpu", gpudriver.NVIDIA, 1)
	ca := s.startAutoscaler()
	s.deploy("train", 1, smallPod, withClaim("one-gpu"))

	// (b) From zero, for a claim.
	s.waitTarget("gpu", 1, 60*time.Second)
	s.waitNodes("gpu", 1, 60*time.Second)
	if ev := s.events("TriggeredScaleUp"); len(ev) == 0 {
		t.Error("no TriggeredScaleUp event on the claim pod")
	}
	// (e) Ready, no slice yet: the node is upcoming, not a node without the device.
	s.holds("one GPU node while its driver starts", 6*time.Second, s.targetIs("gpu", 1))
	s.sb.Agent.ReleaseSlices("gpu")
	s.waitRunning("train", 1, 60*time.Second)
	gpuNode := s.poolNodes("gpu")[0].Name
	if p := s.pods("train")[0]; p.Spec.NodeName != gpuNode {
		t.Fatalf("claim pod runs on %s, want the GPU node %s", p.Spec.NodeName, gpuNode)
	}

	// (a) The node holding the pod's only device stays, well past --scale-down-unneeded-time.
	s.holds("the GPU node kept", 12*time.Second, func() error {
		if tainted := s.taintedNodes(); len(tainted) > 0 {
			return fmt.Errorf("nodes tainted for deletion: %v", tainted)
		}
		return s.nodesAre("gpu", 1)()
	})
	// A second claim pod: no device left, the pool grows (its template now from the ready node).
	s.scaleDeployment("train", 2)
	s.waitTarget("gpu", 2, 60*time.Second)
	s.waitRunning("train", 2, 90*time.Second)
	if m := s.maxTarget("gpu"); m != 2 {
		t.Errorf("GPU pool reached %d nodes, want 2 at most", m)
	}
	if n := s.metric(ca, "cluster_autoscaler_scaled_up_nodes_total", map[string]string{"dra_drivers": gpudriver.NVIDIA}); n != 2 {
		t.Errorf("scaled_up_nodes_total{dra_drivers=%q} = %v, want 2", gpudriver.NVIDIA, n)
	}
}

// (c) A claim no pool can satisfy: an AMD DeviceClass in a cluster with NVIDIA pools only.
// The pod stays pending with a NotTriggerScaleUp event naming its claim and the class, and
// no pool grows.
func TestDRAClaimNoPoolCanSatisfy(t *testing.T) {
	s := newScenario(t, scenarioOptions{
		pools:     []doks.PoolSpec{gpuPool("gpu", h100x1, 0, 2)},
		bootDelay: time.Second,
		agent:     nodeagent.Options{DRADrivers: []string{gpudriver.NVIDIA, gpudriver.AMD}},
	})
	s.claimTemplate("one-amd-gpu", gpudriver.AMD, 1)
	s.startAutoscaler()
	s.deploy("infer", 1, smallPod, withClaim("one-amd-gpu"))
	ev := s.waitEvent("NotTriggerScaleUp", 60*time.Second)
	t.Logf("NotTriggerScaleUp: %s", ev.Message)
	for _, want := range []string{"one-amd-gpu", "class gpu.amd.com"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("NotTriggerScaleUp %q does not name the claim's %q", ev.Message, want)
		}
	}
	s.holds("the NVIDIA pool left at zero", 4*time.Second, s.targetIs("gpu", 0))
}

// (d) A Job whose pod claims 8 GPUs gets one gpu-h100x8-640gb node under least-waste, not
// single-GPU nodes: a claim is allocated on one node.
func TestDRAEightGPUJobGetsOneEightGPUNode(t *testing.T) {
	s := newScenario(t, scenarioOptions{
		pools: []doks.PoolSpec{
			gpuPool("h100x1", h100x1, 0, 8),
			gpuPool("h100x8", h100x8, 0, 1),
		},
		bootDelay: time.Second,
		agent:     nodeagent.Options{DRADrivers: []string{gpudriver.NVIDIA}},
	})
	s.claimTemplate("eight-gpus", gpudriver.NVIDIA, 8)
	s.startAutoscaler("--expander=least-waste")
	// The Deployment builder's pod, as a Job's.
	pod := newDeployment(s.ns, "pretrain", 1, smallPod, withClaim("eight-gpus")).Spec.Template
	pod.Spec.RestartPolicy = apiv1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pretrain"}, Spec: batchv1.JobSpec{Template: pod}}
	if _, err := s.kube.BatchV1().Jobs(s.ns).Create(s.ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitTarget("h100x8", 1, 60*time.Second)
	s.eventually("the Job's pod running on the 8-GPU node", 90*time.Second, func() error {
		l, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "job-name=pretrain"})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if isReady(&p) {
				if nodes := s.poolNodes("h100x8"); len(nodes) != 1 || p.Spec.NodeName != nodes[0].Name {
					return fmt.Errorf("pod %s runs on %s, not on the 8-GPU node", p.Name, p.Spec.NodeName)
				}
				return nil
			}
		}
		return fmt.Errorf("%d pods, none running", len(l.Items))
	})
	if m := s.maxTarget("h100x1"); m != 0 {
		t.Errorf("the single-GPU pool grew to %d nodes for an 8-GPU claim", m)
	}
}

// askingGPUs makes the Deployment's pods ask for n nvidia.com/gpu, as device-plugin
// manifests do, with no ResourceClaim: NVIDIA's DeviceClass serves that resource
// (spec.extendedResourceName), so the scheduler allocates devices to a claim it makes
// for each pod.
func askingGPUs(n int64) deployOption {
	return func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		q := *resource.NewQuantity(n, resource.DecimalSI)
		c.Resources.Requests[nvidiaGPU] = q
		if c.Resources.Limits == nil {
			c.Resources.Limits = apiv1.ResourceList{}
		}
		c.Resources.Limits[nvidiaGPU] = q
	}
}

// Issue 31 (3): pods asking for nvidia.com/gpu on a DRA cluster. Three pending pods
// asking for one GPU each grow a 1-GPU pool by three nodes, not one (each pod gets a
// device of its own in the simulation, as from the scheduler), run one a node, and the
// busy GPU nodes are not drained although the CPU node has room for the pods' CPU.
func TestDRAExtendedResourcePodsGetAGPUNodeEach(t *testing.T) {
	s := newScenario(t, scenarioOptions{
		pools: []doks.PoolSpec{
			{Name: "cpu", Size: "s-4vcpu-8gb", Count: 1},
			gpuPool("gpu", h100x1, 0, 5),
		},
		bootDelay: time.Second,
		agent:     nodeagent.Options{DRADrivers: []string{gpudriver.NVIDIA}},
	})
	s.startAutoscaler()
	s.deploy("infer", 3, smallPod, askingGPUs(1))

	s.waitTarget("gpu", 3, 60*time.Second)
	s.waitRunning("infer", 3, 90*time.Second)
	nodes := map[string]bool{}
	for _, p := range s.pods("infer") {
		if p.Status.ExtendedResourceClaimStatus == nil {
			t.Errorf("pod %s runs without the scheduler's extended resource claim", p.Name)
		}
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != 3 {
		t.Errorf("the three pods run on %d nodes, want one GPU node each", len(nodes))
	}
	s.holds("the busy GPU nodes kept", 12*time.Second, func() error {
		if tainted := s.taintedNodes(); len(tainted) > 0 {
			return fmt.Errorf("nodes tainted for deletion: %v", tainted)
		}
		return s.nodesAre("gpu", 3)()
	})
	if m := s.maxTarget("gpu"); m != 3 {
		t.Errorf("GPU pool reached %d nodes, want 3", m)
	}
	// One decision for the three: a simulation that let them share one
	// device asked for a node, then another, one loop at a time.
	for _, ev := range s.events("TriggeredScaleUp") {
		if !strings.Contains(ev.Message, "0->3") {
			t.Errorf("TriggeredScaleUp %q: want the three GPU nodes asked for at once (0->3)", ev.Message)
		}
	}
}
