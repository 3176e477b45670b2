package core

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// Three 2-cpu nodes: n0 busy (1500m), n1 lightly used (one 200m pod that
// fits on n0), n2 empty. n1 and n2 are unneeded.
func scaleDownFixture(min int) (*test.Provider, []runtime.Object, *apiv1.Pod) {
	p, nodes := cluster(groupSpec{id: "g1", min: min, max: 10, nodes: 3, milliCPU: 2000, mem: 4 * test.GiB})
	light := test.BuildScheduledPod("light", 200, 256*test.MiB, "rs-light", "g1-n1")
	light.Labels = map[string]string{"app": "light"}
	busy := test.BuildScheduledPod("busy", 1500, test.GiB, "rs-busy", "g1-n0")
	return p, join(nodes, []runtime.Object{light, busy}), light
}

// protectFromScaleDown sets the scale-down-disabled annotation on the named
// node among objs, so that it is never a candidate.
func protectFromScaleDown(objs []runtime.Object, name string) {
	for _, o := range objs {
		if n, ok := o.(*apiv1.Node); ok && n.Name == name {
			n.Annotations = map[string]string{scaledown.ScaleDownDisabledAnnotation: "true"}
		}
	}
}

func TestScaleDownAfterUnneededTimeOnly(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(5 * time.Minute))
	h.runOnce(t0.Add(10*time.Minute - time.Second))
	if d := deletions(p); len(d) != 0 {
		t.Fatalf("deleted before the unneeded time: %v", d)
	}
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	d := deletions(p)
	sort.Strings(d)
	if !reflect.DeepEqual(d, []string{"g1:g1-n1", "g1:g1-n2"}) {
		t.Fatalf("DeleteNodes calls = %v, want n1 and n2", d)
	}
	if !reflect.DeepEqual(h.evictions, []string{"default/light"}) {
		t.Fatalf("evictions = %v", h.evictions)
	}
	ev := h.events()
	if n := countEvents(ev, "ScaleDown node removed by cluster autoscaler"); n != 2 {
		t.Errorf("ScaleDown node events = %d: %v", n, ev)
	}
	if n := countEvents(ev, "ScaleDown deleting pod for node scale down"); n != 1 {
		t.Errorf("pod eviction events = %d: %v", n, ev)
	}
	if n := countEvents(ev, "ScaleDownEmpty Scale-down: removing empty node \"g1-n2\" involvedObject{kind=ConfigMap"); n != 1 {
		t.Errorf("ScaleDownEmpty events = %d: %v", n, ev)
	}
	// The drained node keeps its taint until the cloud removes it.
	if !hasTaint(h.node("g1-n1"), clusterstate.ToBeDeletedTaint) {
		t.Error("drained node lost its taint")
	}
	if h.podExists("default", "busy") == false || h.podExists("default", "light") {
		t.Error("wrong pods evicted")
	}
}

func TestScaleDownRespectsMinSize(t *testing.T) {
	p, objs, _ := scaleDownFixture(2)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	h.runOnce(t0.Add(12 * time.Minute))
	if d := deletions(p); !reflect.DeepEqual(d, []string{"g1:g1-n2"}) {
		t.Fatalf("DeleteNodes calls = %v, want only the empty node", d)
	}
}

func TestScaleDownBlockedNodes(t *testing.T) {
	zero := intstr.FromInt32(0)
	cases := []struct {
		name   string
		modify func(light *apiv1.Pod, objs *[]runtime.Object)
		opts   func(*config.AutoscalingOptions)
	}{
		{name: "controller gone", modify: func(light *apiv1.Pod, _ *[]runtime.Object) {
			light.OwnerReferences[0].Name = "gone-rs"
		}},
		{name: "fewer replicas than --min-replica-count", modify: func(*apiv1.Pod, *[]runtime.Object) {},
			opts: func(o *config.AutoscalingOptions) { o.MinReplicaCount = 5 }},
		{name: "safe-to-evict=false", modify: func(light *apiv1.Pod, _ *[]runtime.Object) {
			light.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
		}},
		{name: "PDB allows no disruption", modify: func(_ *apiv1.Pod, objs *[]runtime.Object) {
			*objs = append(*objs, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "light", Namespace: "default"},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "light"}}},
				Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, ExpectedPods: 1},
			})
		}},
		{name: "bare pod", modify: func(light *apiv1.Pod, _ *[]runtime.Object) { light.OwnerReferences = nil }},
		{name: "local storage", modify: func(light *apiv1.Pod, _ *[]runtime.Object) {
			light.Spec.Volumes = []apiv1.Volume{{Name: "scratch", VolumeSource: apiv1.VolumeSource{EmptyDir: &apiv1.EmptyDirVolumeSource{}}}}
		}},
		{name: "no room elsewhere", modify: func(light *apiv1.Pod, _ *[]runtime.Object) {
			light.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = *resourceMilli(900)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, objs, light := scaleDownFixture(0)
			tc.modify(light, &objs)
			o := testOptions()
			if tc.opts != nil {
				tc.opts(&o)
			}
			h := newHarness(t, o, p, objs...)
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := deletions(p); !reflect.DeepEqual(d, []string{"g1:g1-n2"}) {
				t.Fatalf("DeleteNodes calls = %v, want only the empty node", d)
			}
			if len(h.evictions) != 0 {
				t.Fatalf("evictions = %v", h.evictions)
			}
		})
	}
}

// n1 and n2 each hold one pod of a PDB that allows a single disruption; both
// pods fit on n0. Only one of the two nodes may be planned away: the other
// is not counted as unneeded.
// A kube-system pod covered by a PDB may be moved (--skip-nodes-with-system-pods):
// the drain's final check sees the PDB as the plan did, and the node goes.
func TestKubeSystemPodWithPDBIsDrained(t *testing.T) {
	one := intstr.FromInt32(1)
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
	dns := test.BuildScheduledPod("dns", 200, 256*test.MiB, "rs-dns", "g1-n1")
	dns.Namespace = metav1.NamespaceSystem
	dns.Labels = map[string]string{"k8s-app": "dns"}
	objs := join(nodes, fill(nodes[:1], 1000), []runtime.Object{dns,
		&policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: metav1.NamespaceSystem},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "dns"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, ExpectedPods: 1, CurrentHealthy: 1},
		},
	})
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if !reflect.DeepEqual(h.evictions, []string{"kube-system/dns"}) {
		t.Fatalf("evictions = %v, want kube-system/dns", h.evictions)
	}
	if d := deletions(p); !reflect.DeepEqual(d, []string{"g1:g1-n1"}) {
		t.Fatalf("DeleteNodes calls = %v, want g1-n1", d)
	}
}

// A pod below --expendable-pods-priority-cutoff does not keep its node: the
// node counts as empty and goes, the pod with it.
func TestExpendablePodDoesNotKeepNode(t *testing.T) {
	cases := []struct {
		name     string
		priority int32
		want     []string
	}{
		{name: "below the cutoff", priority: -100, want: []string{"g1:g1-n1"}},
		{name: "at the default priority: a bare pod blocks", priority: 0, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
			batch := test.BuildScheduledPod("batch", 1500, test.GiB, "", "g1-n1")
			batch.Spec.Priority = ptr.To(tc.priority)
			h := newHarness(t, testOptions(), p, join(nodes, fill(nodes[:1], 1500), []runtime.Object{batch})...)
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := deletions(p); !reflect.DeepEqual(d, tc.want) {
				t.Fatalf("DeleteNodes calls = %v, want %v", d, tc.want)
			}
		})
	}
}

// Beside a pod to move, a bare expendable pod neither blocks the drain nor
// is evicted: the node is drained of the other pod and goes.
func TestExpendablePodDoesNotBlockDrain(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	batch := test.BuildScheduledPod("batch", 100, test.MiB, "", "g1-n1")
	batch.Spec.Priority = ptr.To[int32](-100)
	h := newHarness(t, testOptions(), p, append(objs, batch)...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	if !reflect.DeepEqual(h.evictions, []string{"default/light"}) {
		t.Fatalf("evictions = %v, want only default/light", h.evictions)
	}
	if d := deletions(p); len(d) != 2 {
		t.Fatalf("DeleteNodes calls = %v, want g1-n1 drained and g1-n2 (empty) removed", d)
	}
}

func TestUnneededNodesShareOnePDBBudget(t *testing.T) {
	one := intstr.FromInt32(1)
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 3, milliCPU: 2000, mem: 4 * test.GiB})
	objs := join(nodes, []runtime.Object{
		test.BuildScheduledPod("busy", 1000, test.GiB, "rs-busy", "g1-n0"),
		&policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, ExpectedPods: 2, CurrentHealthy: 2, DesiredHealthy: 1},
		},
	})
	for _, n := range []string{"g1-n1", "g1-n2"} {
		web := test.BuildScheduledPod("web-"+n, 200, 256*test.MiB, "rs-web", n)
		web.Labels = map[string]string{"app": "web"}
		objs = append(objs, web)
	}
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	var unneeded []string
	for _, c := range h.a.planner.Unneeded() {
		unneeded = append(unneeded, c.Node.Name)
	}
	if !reflect.DeepEqual(unneeded, []string{"g1-n1"}) {
		t.Fatalf("unneeded = %v, want only g1-n1 (the PDB allows one eviction)", unneeded)
	}
}

func TestScaleDownSkipsProtectedNodes(t *testing.T) {
	cases := []struct {
		name   string
		modify func(n *apiv1.Node)
	}{
		{name: "scale-down-disabled annotation", modify: func(n *apiv1.Node) {
			n.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
		}},
		{name: "tainted for deletion by someone else", modify: func(n *apiv1.Node) {
			n.Spec.Taints = []apiv1.Taint{{Key: clusterstate.ToBeDeletedTaint, Value: "1", Effect: apiv1.TaintEffectNoSchedule}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, objs, _ := scaleDownFixture(0)
			for _, o := range objs {
				if n, ok := o.(*apiv1.Node); ok && n.Name == "g1-n2" {
					tc.modify(n)
				}
			}
			h := newHarness(t, testOptions(), p, objs...)
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := deletions(p); !reflect.DeepEqual(d, []string{"g1:g1-n1"}) {
				t.Fatalf("DeleteNodes calls = %v, want only n1", d)
			}
		})
	}
}

func TestFailedDrainUntaintsAndCoolsDown(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	// Only n1 is a candidate: keep n2 out.
	protectFromScaleDown(objs, "g1-n2")
	h := newHarness(t, testOptions(), p, objs...)
	h.evict = func(ns, name string) error {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
	}
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if d := deletions(p); len(d) != 0 {
		t.Fatalf("node deleted despite a failed drain: %v", d)
	}
	if len(h.evictions) < 2 {
		t.Fatalf("eviction not retried: %v", h.evictions)
	}
	if hasTaint(h.node("g1-n1"), clusterstate.ToBeDeletedTaint) {
		t.Fatal("taint left on a node whose drain failed")
	}
	if n := countEvents(h.events(), "Warning ScaleDownFailed"); n != 1 {
		t.Fatalf("ScaleDownFailed events = %d", n)
	}
	// Within --scale-down-delay-after-failure nothing is tried. The failed
	// node starts a new unneeded period, so it goes 10 minutes later.
	h.mu.Lock()
	h.evict = nil
	h.evictions = nil
	h.mu.Unlock()
	h.waitCache("untainted node", func() bool { n, _ := h.a.nodes.Get("g1-n1"); return !hasTaint(n, clusterstate.ToBeDeletedTaint) })
	h.runOnce(t0.Add(13 * time.Minute))
	if len(h.evictions) != 0 || len(deletions(p)) != 0 {
		t.Fatalf("acted during the failure cooldown: %v %v", h.evictions, deletions(p))
	}
	h.runOnce(t0.Add(15 * time.Minute))
	if len(deletions(p)) != 0 {
		t.Fatalf("removed before a new unneeded period: %v", deletions(p))
	}
	h.runOnce(t0.Add(23*time.Minute + time.Second))
	if d := deletions(p); !reflect.DeepEqual(d, []string{"g1:g1-n1"}) {
		t.Fatalf("after the cooldown: %v", d)
	}
}

func TestScaleDownCooldownAfterScaleUp(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	// A pod that fits no node of g1 (3 cpu) triggers a scale-up in "big".
	p.AddNodeGroup("big", 0, 3, 0, test.BuildTemplate("big", 4000, 8*test.GiB, nil))
	objs = append(objs, test.BuildPendingPod("huge", 3000, test.GiB, ""))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"big+1"}) {
		t.Fatalf("scale-up = %v", got)
	}
	h.runOnce(t0.Add(time.Minute))
	h.runOnce(t0.Add(9 * time.Minute))
	if d := deletions(p); len(d) != 0 {
		t.Fatalf("scale-down within --scale-down-delay-after-add: %v", d)
	}
	h.runOnce(t0.Add(11 * time.Minute))
	if d := deletions(p); len(d) != 2 {
		t.Fatalf("scale-down after the delay: %v", d)
	}
}

func TestScaleDownOptions(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*config.AutoscalingOptions)
		want   int
	}{
		{name: "disabled", modify: func(o *config.AutoscalingOptions) { o.ScaleDownEnabled = false }, want: 0},
		{name: "longer unneeded time", modify: func(o *config.AutoscalingOptions) { o.NodeGroupDefaults.ScaleDownUnneededTime = time.Hour }, want: 0},
		{name: "low threshold keeps n1", modify: func(o *config.AutoscalingOptions) { o.NodeGroupDefaults.ScaleDownUtilizationThreshold = 0.05 }, want: 1},
		{name: "min cores", modify: func(o *config.AutoscalingOptions) { o.MinCoresTotal = 4 }, want: 1},
		// 0 or less is no limit, as upstream's help says: n1 is drained too.
		{name: "non-empty candidates count 0", modify: func(o *config.AutoscalingOptions) { o.ScaleDownNonEmptyCandidatesCount = 0 }, want: 2},
		{name: "non-empty candidates count -1", modify: func(o *config.AutoscalingOptions) { o.ScaleDownNonEmptyCandidatesCount = -1 }, want: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, objs, _ := scaleDownFixture(0)
			o := testOptions()
			tc.modify(&o)
			h := newHarness(t, o, p, objs...)
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := deletions(p); len(d) != tc.want {
				t.Fatalf("DeleteNodes calls = %v, want %d", d, tc.want)
			}
		})
	}
}

// A GPU node is judged by its GPU use against
// --scale-down-gpu-utilization-threshold, not by cpu or memory.
func TestGPUNodeJudgedByGPUUtilization(t *testing.T) {
	const gpu = apiv1.ResourceName("nvidia.com/gpu")
	cases := []struct {
		name      string
		threshold float64
		want      int
	}{
		{name: "a quarter of its GPUs used, under 0.5", threshold: 0.5, want: 1},
		{name: "a quarter of its GPUs used, over 0.2", threshold: 0.2, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "gpu", min: 0, max: 5, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
			for _, o := range nodes {
				n := o.(*apiv1.Node)
				n.Status.Capacity[gpu] = *resource.NewQuantity(4, resource.DecimalSI)
				n.Status.Allocatable[gpu] = *resource.NewQuantity(4, resource.DecimalSI)
				p.SetGpuConfig(n.Name, &cloudprovider.GpuConfig{Type: "nvidia", ExtendedResourceName: gpu})
			}
			// n0 has half its GPUs in use; n1 a quarter, with most of its cpu
			// (0.8: busy by cpu), and its pod fits n0.
			half := test.BuildScheduledPod("half", 100, test.MiB, "rs-half", "gpu-n0")
			half.Spec.Containers[0].Resources.Requests[gpu] = *resource.NewQuantity(2, resource.DecimalSI)
			quarter := test.BuildScheduledPod("quarter", 1500, test.MiB, "rs-quarter", "gpu-n1")
			quarter.Spec.Containers[0].Resources.Requests[gpu] = *resource.NewQuantity(1, resource.DecimalSI)
			o := testOptions()
			o.NodeGroupDefaults.ScaleDownGpuUtilizationThreshold = tc.threshold
			h := newHarness(t, o, p, join(nodes, []runtime.Object{half, quarter})...)
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			d := deletions(p)
			if len(d) != tc.want {
				t.Fatalf("DeleteNodes calls = %v, want %d", d, tc.want)
			}
			if tc.want == 1 && d[0] != "gpu:gpu-n1" {
				t.Fatalf("DeleteNodes calls = %v, want gpu-n1", d)
			}
		})
	}
}

func TestScaleDownDelayAfterDelete(t *testing.T) {
	cases := []struct {
		name          string
		delay         time.Duration
		within, after time.Duration // since the first removal started
	}{
		{name: "flag set", delay: 5 * time.Minute, within: 4 * time.Minute, after: 5*time.Minute + time.Second},
		// 0, the default, means no delay, as upstream 1.36: the loop that
		// follows a removal may start the next one.
		{name: "0 is no delay", delay: 0, after: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 4, milliCPU: 2000, mem: 4 * test.GiB})
			o := testOptions()
			o.MaxScaleDownParallelism = 1
			o.ScaleDownDelayAfterDelete = tc.delay
			h := newHarness(t, o, p, nodes...)
			h.runOnce(t0)
			start := t0.Add(11 * time.Minute)
			h.runOnce(start)
			if tc.within > 0 {
				h.runOnce(start.Add(tc.within))
				if d := deletions(p); len(d) != 1 {
					t.Fatalf("DeleteNodes calls within the delay after delete = %v", d)
				}
			}
			h.runOnce(start.Add(tc.after))
			if d := deletions(p); len(d) != 2 {
				t.Fatalf("DeleteNodes calls after the delay = %v", d)
			}
		})
	}
}

// A pod bound to an empty candidate just before it is tainted, and not yet
// in the informer cache, must keep the node: whatever kind of pod it is.
func TestEmptyNodeKeptWhenPodArrivesBeforeTaint(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*apiv1.Pod)
	}{
		{name: "replicated pod", modify: func(*apiv1.Pod) {}},
		{name: "bare pod", modify: func(p *apiv1.Pod) { p.OwnerReferences = nil }},
		{name: "safe-to-evict=false", modify: func(p *apiv1.Pod) {
			p.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
			busy := fill(nodes[:1], 1500)
			h := newHarness(t, testOptions(), p, join(nodes, busy)...)
			late := test.BuildScheduledPod("late", 100, test.MiB, "rs-late", "g1-n1")
			tc.modify(late)
			added := false
			// Reactors run under the fake clientset's lock: the pod goes
			// straight into its tracker, which the informers have not read.
			h.kube.PrependReactor("update", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
				n := action.(k8stesting.UpdateAction).GetObject().(*apiv1.Node)
				if n.Name == "g1-n1" && hasTaint(n, clusterstate.ToBeDeletedTaint) && !added {
					added = true
					if err := h.kube.Tracker().Add(late.DeepCopy()); err != nil {
						t.Error(err)
					}
				}
				return false, nil, nil
			})
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := deletions(p); len(d) != 0 {
				t.Fatalf("DeleteNodes calls = %v, want none: a pod arrived", d)
			}
			if !h.podExists("default", "late") {
				t.Error("the pod that arrived was deleted")
			}
			if hasTaint(h.node("g1-n1"), clusterstate.ToBeDeletedTaint) {
				t.Error("the kept node is still tainted")
			}
		})
	}
}

func TestEmptyNodesBulkLimit(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 5, milliCPU: 2000, mem: 4 * test.GiB})
	o := testOptions()
	o.MaxScaleDownParallelism = 2
	h := newHarness(t, o, p, nodes...)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	calls := p.CallsOf("DeleteNodes")
	if len(calls) != 1 || len(calls[0].Nodes) != 2 {
		t.Fatalf("DeleteNodes calls = %+v, want one call with 2 nodes", calls)
	}
}

func TestUnreadyNodeRemovedAfterUnreadyTime(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 3, milliCPU: 2000, mem: 4 * test.GiB})
	busy := fill(nodes[:2], 1500)
	test.SetNodeReady(nodes[2].(*apiv1.Node), false, t0.Add(-time.Hour))
	h := newHarness(t, testOptions(), p, join(nodes, busy)...)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if d := deletions(p); len(d) != 0 {
		t.Fatalf("unready node removed after the unneeded time: %v", d)
	}
	h.runOnce(t0.Add(21 * time.Minute))
	if d := deletions(p); !reflect.DeepEqual(d, []string{"g1:g1-n2"}) {
		t.Fatalf("DeleteNodes calls = %v", d)
	}
}

func TestStaleTaintsRemovedAtStart(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 0, max: 10, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
	stale := nodes[0].(*apiv1.Node)
	stale.Spec.Taints = []apiv1.Taint{
		{Key: clusterstate.ToBeDeletedTaint, Value: "1700000000", Effect: apiv1.TaintEffectNoSchedule},
		{Key: clusterstate.DeletionCandidateTaint, Value: "1700000000", Effect: apiv1.TaintEffectPreferNoSchedule},
		{Key: "dedicated", Value: "x", Effect: apiv1.TaintEffectNoSchedule},
	}
	kube := fake.NewClientset(withReplicaSets(join(nodes, fill(nodes, 1800)))...)
	o := testOptions()
	o.ScanInterval = time.Hour
	a, err := newAutoscaler(o, kube, p, nil, nil, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _ := kube.CoreV1().Nodes().Get(ctx, stale.Name, metav1.GetOptions{})
		if len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == "dedicated" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale taints not removed: %+v", n.Spec.Taints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Run wrote the status and ran an iteration; ExitCleanUp removes it.
	for time.Now().Before(deadline) && len(p.CallsOf("Refresh")) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "cluster-autoscaler-status", metav1.GetOptions{}); err != nil {
		t.Fatalf("status ConfigMap not written: %v", err)
	}
	a.ExitCleanUp()
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "cluster-autoscaler-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("status ConfigMap left after ExitCleanUp: %v", err)
	}
	if len(p.CallsOf("Cleanup")) != 1 {
		t.Fatal("provider Cleanup not called")
	}
}

// Drains run in the background; meanwhile the node counts as being
// deleted: not a candidate again, not capacity for pending pods, and
// counted against the group's min size.
func TestBackgroundDrainTracksNode(t *testing.T) {
	p, objs, _ := scaleDownFixture(1)
	o := testOptions()
	o.MaxPodEvictionTime = time.Minute
	h := newAsyncHarness(t, o, p, objs...)
	release := h.refuseEvictions()
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute)) // n2 (empty) and n1 (drain) start
	deadline := time.Now().Add(5 * time.Second)
	for _, drains := h.a.removals.InFlight(); drains == 0 || len(deletions(p)) == 0; _, drains = h.a.removals.InFlight() {
		if time.Now().After(deadline) {
			t.Fatalf("drain not started: %v", deletions(p))
		}
		time.Sleep(time.Millisecond)
	}
	if !h.a.removals.BeingDeleted()["g1-n1"] {
		t.Fatal("draining node not tracked")
	}
	h.waitCache("taint on n1", func() bool { n, _ := h.a.nodes.Get("g1-n1"); return hasTaint(n, clusterstate.ToBeDeletedTaint) })
	// Another loop while the drain runs: n1 is neither re-planned nor
	// counted for scale-up; with n2 gone and n1 leaving, g1 is at its min.
	h.runOnce(t0.Add(12 * time.Minute))
	if un := h.a.planner.Unneeded(); len(un) != 0 {
		t.Fatalf("unneeded while draining: %d", len(un))
	}
	release()
	h.a.actuator.Wait()
	d := deletions(p)
	sort.Strings(d)
	if !reflect.DeepEqual(d, []string{"g1:g1-n1", "g1:g1-n2"}) {
		t.Fatalf("DeleteNodes calls = %v", d)
	}
}

// When a removal ends, the loop is woken at once: more unneeded nodes may be
// waiting for the --max-scale-down-parallelism budget it held.
func TestEndedRemovalWakesTheLoop(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(11 * time.Minute))
	if len(deletions(p)) == 0 {
		t.Fatal("no removal in the second loop")
	}
	woke := make(chan string, 1)
	go func() { woke <- h.a.trigger.Wait(h.ctx, time.Hour, false) }()
	select {
	case got := <-woke:
		if got != WakeRemoval {
			t.Fatalf("loop woke for %q, want %q", got, WakeRemoval)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop was not woken after the removal ended")
	}
}

// After a loop that finds nodes unneeded, the loop knows when the first of
// them reaches --scale-down-unneeded-time, to wake then.
func TestNextScaleDownAtIsWhenTheFirstNodeComesOfAge(t *testing.T) {
	p, objs, _ := scaleDownFixture(0)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if want := t0.Add(testOptions().NodeGroupDefaults.ScaleDownUnneededTime); !h.a.nextScaleDownAt.Equal(want) {
		t.Fatalf("next scale-down at %v, want %v (first unneeded at t0 + --scale-down-unneeded-time)", h.a.nextScaleDownAt, want)
	}
}
