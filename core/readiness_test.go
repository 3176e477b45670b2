package core

import (
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// A node that registered and reports Ready but still carries a lifecycle
// taint, or a NetworkUnavailable / DiskPressure condition, is not ready as
// upstream judges it: it is upcoming capacity, and the pod waiting for it
// causes no second scale-up.
func TestNotYetReadyNodeCountsAsUpcoming(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(n *apiv1.Node)
	}{
		{"not-ready taint", func(n *apiv1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: apiv1.TaintNodeNotReady, Effect: apiv1.TaintEffectNoSchedule})
		}},
		{"network-unavailable taint", func(n *apiv1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: apiv1.TaintNodeNetworkUnavailable, Effect: apiv1.TaintEffectNoSchedule})
		}},
		{"NetworkUnavailable condition", func(n *apiv1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, apiv1.NodeCondition{Type: apiv1.NodeNetworkUnavailable, Status: apiv1.ConditionTrue})
			// The scheduler would not place pods there either.
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: "example.com/cni-not-ready", Effect: apiv1.TaintEffectNoSchedule})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
			starting := nodes[1].(*apiv1.Node)
			starting.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
			tc.modify(starting)
			h := newHarness(t, testOptions(), p, join(nodes, fill(nodes[:1], 1800), pendingPods("web", 1, 500, 256*test.MiB))...)
			h.runOnce(t0)
			h.runOnce(t0.Add(10 * time.Second))
			if got := increases(p); len(got) != 0 {
				t.Fatalf("IncreaseSize calls = %v, want none: the pod waits for the starting node", got)
			}
		})
	}
}

// gpuPods are pending pods asking for one nvidia.com/gpu each.
func gpuPods(prefix string, count int) []runtime.Object {
	out := pendingPods(prefix, count, 500, 256*test.MiB)
	for _, o := range out {
		c := &o.(*apiv1.Pod).Spec.Containers[0]
		one := *resource.NewQuantity(1, resource.DecimalSI)
		c.Resources.Requests["nvidia.com/gpu"] = one
		if c.Resources.Limits == nil {
			c.Resources.Limits = apiv1.ResourceList{}
		}
		c.Resources.Limits["nvidia.com/gpu"] = one
	}
	return out
}

// 3 pending GPU pods → +3 GPU nodes. The nodes register Ready, but their
// device plugin has not advertised the GPU yet: they are upcoming, not
// ready, and the next loop asks for nothing more (upstream's GPU
// custom-resources processor). Once the GPUs show, the pods fit them.
func TestGPUNodeWithoutGPUResourceIsUpcoming(t *testing.T) {
	gpuLabels := map[string]string{"test.gpu/type": "nvidia"}
	p, nodes := cluster(
		groupSpec{id: "base", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "gpu", min: 0, max: 10, nodes: 0, milliCPU: 4000, mem: 8 * test.GiB, labels: gpuLabels},
	)
	setGPUTemplate(t, p, "gpu", 1)
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800), gpuPods("train", 3))...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"gpu+3"}) {
		t.Fatalf("first loop: IncreaseSize calls = %v, want [gpu+3]", got)
	}
	ins, _ := p.Group("gpu").Nodes()
	var registered []*apiv1.Node
	for i, in := range ins {
		n := test.BuildNode("gpu-node-"+string(rune('a'+i)), 4000, 8*test.GiB)
		n.Spec.ProviderID = in.Id
		n.Labels["test.gpu/type"] = "nvidia"
		n.CreationTimestamp = metav1.NewTime(t0.Add(30 * time.Second))
		h.createNode(n)
		registered = append(registered, n)
	}
	h.runOnce(t0.Add(time.Minute))
	h.runOnce(t0.Add(2 * time.Minute))
	if got := increases(p); !reflect.DeepEqual(got, []string{"gpu+3"}) {
		t.Fatalf("after the GPU-less nodes registered: IncreaseSize calls = %v, want only the first gpu+3", got)
	}
	gs, _ := h.a.registry.NodeGroup("gpu")
	if gs.Readiness.NotStarted != 3 || gs.Readiness.Ready != 0 {
		t.Fatalf("gpu group readiness = %+v, want 3 not started", gs.Readiness)
	}
	// The device plugin comes up: the nodes are ready.
	for _, n := range registered {
		n.Status.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(1, resource.DecimalSI)
		n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(1, resource.DecimalSI)
		if _, err := h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitCache("GPUs advertised", func() bool {
		for _, n := range registered {
			got, err := h.a.cache.nodes.Get(n.Name)
			if err != nil || got.Status.Allocatable.Name("nvidia.com/gpu", resource.DecimalSI).IsZero() {
				return false
			}
		}
		return true
	})
	h.runOnce(t0.Add(3 * time.Minute))
	if gs, _ := h.a.registry.NodeGroup("gpu"); gs.Readiness.Ready != 3 {
		t.Fatalf("gpu group readiness after the GPUs showed = %+v, want 3 ready", gs.Readiness)
	}
	if got := increases(p); len(got) != 1 {
		t.Fatalf("IncreaseSize calls = %v", got)
	}
}

// setGPUTemplate gives the group's template gpus nvidia.com/gpu.
func setGPUTemplate(t *testing.T, p *test.Provider, group string, gpus int64) {
	t.Helper()
	g := p.Group(group)
	tmpl, err := g.TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	n := tmpl.Node()
	n.Status.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	g.SetTemplate(tmpl)
}

// NodeGroupForNode failing for longer than --max-node-provision-time must
// not make running, registered nodes look unregistered: nothing is deleted
// and no target is lowered.
func TestNodeGroupForNodeErrorsDeleteNothing(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 3, milliCPU: 2000, mem: 4 * test.GiB})
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800))...)
	p.InjectError("NodeGroupForNode", errString("provider lookup failed"))
	for _, at := range []time.Duration{0, 10 * time.Minute, 16 * time.Minute, 32 * time.Minute} {
		h.runOnce(t0.Add(at))
	}
	for _, m := range []string{"DeleteNodes", "DecreaseTargetSize", "IncreaseSize"} {
		if c := p.CallsOf(m); len(c) != 0 {
			t.Fatalf("%s calls = %+v, want none", m, c)
		}
	}
	if ts, _ := p.Group("g1").TargetSize(); ts != 3 {
		t.Fatalf("target = %d, want 3", ts)
	}
}
