package core

import (
	"reflect"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/priority"
)

// One full 2-cpu node in g1 and 10 pending pods of 500m: 4 fit per new
// node, so 3 nodes are needed.
func scaleUpFixture(max int) (*test.Provider, []runtime.Object) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: max, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	return p, join(nodes, fill(nodes, 1800), pendingPods("web", 10, 500, 256*test.MiB))
}

func TestScaleUpExactCountAndEvents(t *testing.T) {
	p, objs := scaleUpFixture(10)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"g1+3"}) {
		t.Fatalf("IncreaseSize calls = %v, want [g1+3]", got)
	}
	ev := h.events()
	if n := countEvents(ev, "TriggeredScaleUp pod triggered scale-up: [{g1 1->4 (max: 10)}]"); n != 10 {
		t.Fatalf("TriggeredScaleUp events = %d, want 10: %v", n, ev)
	}
	if n := countEvents(ev, "ScaledUpGroup Scale-up: setting group g1 size to 4 instead of 1 (max: 10) involvedObject{kind=ConfigMap"); n != 1 {
		t.Fatalf("ScaledUpGroup events = %d: %v", n, ev)
	}
	cm, err := h.kube.CoreV1().ConfigMaps("kube-system").Get(h.ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := cm.Data["status"]; !strings.Contains(s, "autoscalerStatus: Running") || !strings.Contains(s, "status: InProgress") {
		t.Fatalf("status ConfigMap:\n%s", s)
	}
}

func TestScaleUpNotRepeatedForUpcomingNodes(t *testing.T) {
	p, objs := scaleUpFixture(10)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Second))
	h.runOnce(t0.Add(time.Minute))
	if got := increases(p); !reflect.DeepEqual(got, []string{"g1+3"}) {
		t.Fatalf("IncreaseSize calls = %v, want exactly one g1+3", got)
	}
	if h.a.sync.rebuilds != 1 {
		t.Fatalf("snapshot rebuilt %d times; later loops should update it in place", h.a.sync.rebuilds)
	}
}

// The nodes a scale-up asked for hold the pods it packed on them, whatever
// order the pods are listed in: the estimator packed 4 pods of 1500m and 4
// of 500m largest first, a pair per 2-cpu node; checked against the
// upcoming nodes small ones first, the 500m pods took the room of two large
// ones, and the next loop bought a node more.
func TestUpcomingNodesHoldThePodsTheyWereBoughtFor(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800),
		pendingPods("a-small", 4, 500, 256*test.MiB), pendingPods("b-large", 4, 1500, 256*test.MiB))...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Second))
	if got := increases(p); !reflect.DeepEqual(got, []string{"g1+4"}) {
		t.Fatalf("IncreaseSize calls = %v, want exactly one g1+4", got)
	}
}

func TestScaleUpLimits(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*config.AutoscalingOptions)
		max    int
		want   []string
	}{
		{name: "defaults", want: []string{"g1+3"}},
		{name: "group max", max: 3, want: []string{"g1+2"}},
		{name: "max nodes total", modify: func(o *config.AutoscalingOptions) { o.MaxNodesTotal = 3 }, want: []string{"g1+2"}},
		{name: "max cores total", modify: func(o *config.AutoscalingOptions) { o.MaxCoresTotal = 7 }, want: []string{"g1+2"}},
		{name: "max memory total", modify: func(o *config.AutoscalingOptions) { o.MaxMemoryTotal = 12 * test.GiB }, want: []string{"g1+2"}},
		{name: "max nodes per scale-up", modify: func(o *config.AutoscalingOptions) { o.MaxNodesPerScaleUp = 1 }, want: []string{"g1+1"}},
		{name: "max nodes total reached", modify: func(o *config.AutoscalingOptions) { o.MaxNodesTotal = 1 }, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 10
			}
			p, objs := scaleUpFixture(max)
			o := testOptions()
			if tc.modify != nil {
				tc.modify(&o)
			}
			h := newHarness(t, o, p, objs...)
			h.runOnce(t0)
			if got := increases(p); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IncreaseSize calls = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScaleUpProviderResourceLimiter(t *testing.T) {
	p, objs := scaleUpFixture(10)
	p.SetResourceLimiter(cloudprovider.NewResourceLimiter(nil, map[string]int64{cloudprovider.ResourceNameCores: 4}))
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"g1+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [g1+1]", got)
	}
}

func TestMaxSizeReachedEmitsNotTriggerScaleUp(t *testing.T) {
	// Group max 2: one node can be added (4 pods); the other 6 pods get a
	// NotTriggerScaleUp on the next iteration, once, not every loop.
	p, objs := scaleUpFixture(2)
	h := newHarness(t, testOptions(), p, objs...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"g1+1"}) {
		t.Fatalf("IncreaseSize calls = %v", got)
	}
	h.events()
	h.runOnce(t0.Add(10 * time.Second))
	ev := h.events()
	if n := countEvents(ev, "NotTriggerScaleUp pod didn't trigger scale-up: 1 max node group size reached"); n != 6 {
		t.Fatalf("NotTriggerScaleUp events = %d, want 6: %v", n, ev)
	}
	h.runOnce(t0.Add(20 * time.Second))
	h.runOnce(t0.Add(5 * time.Minute))
	if n := countEvents(h.events(), "NotTriggerScaleUp"); n != 0 {
		t.Fatalf("NotTriggerScaleUp repeated within 10 minutes: %d", n)
	}
	h.runOnce(t0.Add(11 * time.Minute))
	if n := countEvents(h.events(), "NotTriggerScaleUp"); n != 6 {
		t.Fatalf("NotTriggerScaleUp after 10 minutes = %d, want 6", n)
	}
	if got := increases(p); len(got) != 1 {
		t.Fatalf("IncreaseSize calls = %v", got)
	}
}

func TestNotTriggerScaleUpAggregatesReasons(t *testing.T) {
	taint := apiv1.Taint{Key: "dedicated", Value: "gpu", Effect: apiv1.TaintEffectNoSchedule}
	p, nodes := cluster(
		groupSpec{id: "full", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "tainted", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB, taints: []apiv1.Taint{taint}},
		groupSpec{id: "small", min: 0, max: 5, nodes: 0, milliCPU: 1000, mem: 4 * test.GiB},
	)
	big := test.BuildPendingPod("big", 1500, test.GiB, "")
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800), []runtime.Object{big})...)
	h.runOnce(t0)
	onlyNotTriggered(t, h, p, "1 max node group size reached", "1 node(s) had untolerated taint", "1 Insufficient cpu")
}

// onlyNotTriggered checks that there was no scale-up, and one NotTriggerScaleUp event giving
// every reason in wants.
func onlyNotTriggered(t *testing.T, h *harness, p *test.Provider, wants ...string) {
	t.Helper()
	if got := increases(p); len(got) != 0 {
		t.Fatalf("IncreaseSize calls = %v, want none", got)
	}
	ev := h.events()
	if len(ev) != 1 {
		t.Fatalf("events = %v, want one NotTriggerScaleUp", ev)
	}
	for _, want := range append([]string{"NotTriggerScaleUp pod didn't trigger scale-up: "}, wants...) {
		if !strings.Contains(ev[0], want) {
			t.Errorf("event %q lacks %q", ev[0], want)
		}
	}
}

func TestNotTriggerScaleUpWhenSelectorMatchesNoGroup(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "plain", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "hdd", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB, labels: map[string]string{"disktype": "hdd"}},
	)
	picky := test.BuildPendingPod("picky", 100, test.MiB, "")
	picky.Spec.NodeSelector = map[string]string{"disktype": "ssd"}
	h := newHarness(t, testOptions(), p, join(nodes, []runtime.Object{picky})...)
	h.runOnce(t0)
	onlyNotTriggered(t, h, p, "2 node(s) didn't match Pod's node affinity/selector")
}

func TestScaleUpFromZero(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "base", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "zero", min: 0, max: 5, nodes: 0, milliCPU: 4000, mem: 8 * test.GiB, labels: map[string]string{"pool": "zero"}},
	)
	pod := test.BuildPendingPod("needs-zero", 1000, test.GiB, "")
	pod.Spec.NodeSelector = map[string]string{"pool": "zero"}
	h := newHarness(t, testOptions(), p, join(nodes, []runtime.Object{pod})...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"zero+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [zero+1]", got)
	}
}

func TestScaleUpFromZeroNodesFlag(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		p, _ := cluster(groupSpec{id: "g", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB})
		o := testOptions()
		o.ScaleUpFromZero = enabled
		h := newHarness(t, o, p, pendingPods("p", 1, 500, test.GiB)...)
		h.runOnce(t0)
		if got := len(increases(p)); (got == 1) != enabled {
			t.Errorf("ScaleUpFromZero=%v with no ready node: %d scale-ups", enabled, got)
		}
	}
}

func TestPendingPodFilters(t *testing.T) {
	prio := int32(-50)
	expendable := test.BuildPendingPod("expendable", 500, test.GiB, "")
	expendable.Spec.Priority = &prio
	young := test.BuildPendingPod("young", 500, test.GiB, "")
	young.CreationTimestamp = metav1.NewTime(t0.Add(-30 * time.Second))
	annotated := func(age time.Duration, delay string) *apiv1.Pod {
		p := test.BuildPendingPod("annotated", 500, test.GiB, "")
		p.CreationTimestamp = metav1.NewTime(t0.Add(-age))
		p.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": delay}
		return p
	}
	cases := []struct {
		name string
		pod  *apiv1.Pod
		want int
	}{
		{name: "expendable ignored", pod: expendable, want: 0},
		{name: "younger than delay", pod: young, want: 0},
		// The annotation lengthens the delay; it cannot shorten it.
		{name: "annotation cannot shorten the delay", pod: annotated(30*time.Second, "10s"), want: 0},
		{name: "older than the delay, younger than the annotation", pod: annotated(2*time.Minute, "5m"), want: 0},
		{name: "older than the annotation", pod: annotated(6*time.Minute, "5m"), want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
			o := testOptions()
			o.NewPodScaleUpDelay = time.Minute
			h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), []runtime.Object{tc.pod})...)
			h.runOnce(t0)
			if got := len(increases(p)); got != tc.want {
				t.Fatalf("scale-ups = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPodsFittingExistingNodesDoNotScaleUp(t *testing.T) {
	// Scheduler lag: the pod is marked unschedulable but a node has room.
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	h := newHarness(t, testOptions(), p, join(nodes, pendingPods("p", 3, 500, test.GiB))...)
	h.runOnce(t0)
	if got := increases(p); len(got) != 0 {
		t.Fatalf("IncreaseSize calls = %v, want none", got)
	}
}

// A node that registered and is Ready but still holds a startup taint (here
// Cilium's agent-not-ready) cannot take pods yet. Counted as upcoming, it
// keeps the pod waiting for it from causing a second scale-up; without the
// flag the node looks like a full one and another node is requested.
func TestStartupTaintedNodeCountsAsUpcoming(t *testing.T) {
	const cilium = "node.cilium.io/agent-not-ready"
	for _, tc := range []struct {
		name          string
		startupTaints []string
		want          []string
	}{
		{"declared with --startup-taint", []string{cilium}, nil},
		{"not declared", nil, []string{"g1+1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 5, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
			starting := nodes[1].(*apiv1.Node)
			starting.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
			starting.Spec.Taints = append(starting.Spec.Taints, apiv1.Taint{Key: cilium, Effect: apiv1.TaintEffectNoSchedule})
			o := testOptions()
			o.StartupTaints = tc.startupTaints
			h := newHarness(t, o, p, join(nodes, fill(nodes[:1], 1800), pendingPods("web", 1, 500, 256*test.MiB))...)
			h.runOnce(t0)
			if got := increases(p); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IncreaseSize calls = %v, want %v", got, tc.want)
			}
		})
	}
}

// A pool whose nodes start with a startup or status taint still scales up
// for pods that do not tolerate it: the taint is left out of the template.
func TestTransientTaintsLeftOutOfTemplates(t *testing.T) {
	for _, key := range []string{
		"startup-taint.cluster-autoscaler.kubernetes.io/disk-setup",
		"status-taint.cluster-autoscaler.kubernetes.io/gpu-health",
		"example.com/warming", // declared with --status-taint below
	} {
		t.Run(key, func(t *testing.T) {
			p, nodes := cluster(
				groupSpec{id: "full", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
				groupSpec{id: "g1", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB,
					taints: []apiv1.Taint{{Key: key, Effect: apiv1.TaintEffectNoSchedule}}})
			o := testOptions()
			o.StatusTaints = []string{"example.com/warming"}
			h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), pendingPods("web", 2, 500, 256*test.MiB))...)
			h.runOnce(t0)
			if got := increases(p); !reflect.DeepEqual(got, []string{"g1+1"}) {
				t.Fatalf("IncreaseSize calls = %v, want [g1+1]", got)
			}
		})
	}
}

func TestExpanderChoice(t *testing.T) {
	// Four 500m pods: "small" (1 cpu) needs 2 nodes with no waste, "big"
	// (8 cpu) one node with most of it idle.
	specs := []groupSpec{
		{id: "base", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		{id: "big", min: 0, max: 5, nodes: 0, milliCPU: 8000, mem: 16 * test.GiB},
		{id: "small", min: 0, max: 5, nodes: 0, milliCPU: 1000, mem: 2 * test.GiB},
	}
	cases := []struct {
		expanders []string
		cm        string
		want      string
	}{
		{expanders: []string{"least-waste"}, want: "small+2"},
		{expanders: []string{"priority", "least-waste"}, cm: "10:\n  - small\n20:\n  - ^big$\n", want: "big+1"},
		{expanders: []string{"priority", "least-waste"}, cm: "20:\n  - small\n  - big\n", want: "small+2"},
		{expanders: []string{"priority", "least-waste"}, cm: "not yaml: [", want: "small+2"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.expanders, ",")+" "+tc.want, func(t *testing.T) {
			p, nodes := cluster(specs...)
			objs := join(nodes, fill(nodes, 1800), pendingPods("web", 4, 500, 256*test.MiB))
			if tc.cm != "" {
				objs = append(objs, &apiv1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: priority.ConfigMapName, Namespace: "kube-system", ResourceVersion: "1"},
					Data:       map[string]string{priority.ConfigMapKey: tc.cm},
				})
			}
			o := testOptions()
			o.ExpanderNames = tc.expanders
			h := newHarness(t, o, p, objs...)
			h.runOnce(t0)
			if got := increases(p); !reflect.DeepEqual(got, []string{tc.want}) {
				t.Fatalf("IncreaseSize calls = %v, want [%s]", got, tc.want)
			}
		})
	}
}

func TestPriorityConfigMapReload(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "base", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "a", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB, labels: map[string]string{"pool": "a"}},
		groupSpec{id: "b", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB, labels: map[string]string{"pool": "b"}},
	)
	cm := &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: priority.ConfigMapName, Namespace: "kube-system"},
		Data:       map[string]string{priority.ConfigMapKey: "50:\n  - ^a$\n10:\n  - ^b$\n"},
	}
	o := testOptions()
	o.ExpanderNames = []string{"priority", "least-waste"}
	h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), pendingPods("first", 2, 1000, test.GiB), []runtime.Object{cm})...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1"}) {
		t.Fatalf("before reload: %v, want [a+1]", got)
	}
	// The node arrives and fills up; then the user flips the priorities.
	ins, _ := p.Group("a").Nodes()
	n := test.BuildNode("a-new", 2000, 4*test.GiB)
	n.Labels["pool"] = "a"
	n.Spec.ProviderID = ins[0].Id
	h.createNode(n)
	// The scheduler places the first pods there.
	for _, name := range []string{"first-0", "first-1"} {
		if err := h.kube.CoreV1().Pods("default").Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.createPod(test.BuildScheduledPod(name+"-bound", 1000, test.GiB, "first", "a-new"))
	}
	cm.Data[priority.ConfigMapKey] = "50:\n  - ^b$\n10:\n  - ^a$\n"
	cm.ResourceVersion = ""
	if _, err := h.kube.CoreV1().ConfigMaps("kube-system").Update(h.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCache("priority update", func() bool {
		got, err := h.a.cache.nsFactory.Core().V1().ConfigMaps().Lister().ConfigMaps("kube-system").Get(priority.ConfigMapName)
		return err == nil && strings.Contains(got.Data[priority.ConfigMapKey], "^b$\n10")
	})
	for _, o := range pendingPods("second", 2, 1000, test.GiB) {
		h.createPod(o.(*apiv1.Pod))
	}
	h.runOnce(t0.Add(time.Minute))
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1", "b+1"}) {
		t.Fatalf("after reload: %v, want [a+1 b+1]", got)
	}
}

func TestBalanceSimilarNodeGroups(t *testing.T) {
	for _, balance := range []bool{true, false} {
		p, nodes := cluster(
			groupSpec{id: "a", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB, labels: map[string]string{"doks.digitalocean.com/node-pool-id": "a"}},
			groupSpec{id: "b", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB, labels: map[string]string{"doks.digitalocean.com/node-pool-id": "b"}},
		)
		o := testOptions()
		o.BalanceSimilarNodeGroups = balance
		h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), pendingPods("web", 8, 1000, test.GiB))...)
		h.runOnce(t0)
		got := increases(p)
		if balance && !reflect.DeepEqual(got, []string{"a+2", "b+2"}) {
			t.Errorf("balanced: %v, want [a+2 b+2]", got)
		}
		if !balance && (len(got) != 1 || !strings.HasSuffix(got[0], "+4")) {
			t.Errorf("not balanced: %v, want one group +4", got)
		}
	}
}

// preferAOverB returns baseNodes full nodes in group "base", pods pending pods of
// milliCPU each, and two empty groups "a" and "b" of the same shape, with the
// priority expander preferring "a".
func preferAOverB(t *testing.T, baseNodes, pods int, milliCPU int64) (*test.Provider, *harness) {
	t.Helper()
	p, nodes := cluster(
		groupSpec{id: "base", min: baseNodes, max: baseNodes, nodes: baseNodes, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "a", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "b", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB},
	)
	cm := &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: priority.ConfigMapName, Namespace: "kube-system"},
		Data:       map[string]string{priority.ConfigMapKey: "50:\n  - ^a$\n10:\n  - ^b$\n"},
	}
	o := testOptions()
	o.ExpanderNames = []string{"priority"}
	h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), pendingPods("web", pods, milliCPU, test.GiB), []runtime.Object{cm})...)
	return p, h
}

// Two groups, "a" preferred by priority. The nodes requested from "a"
// never register: after MaxNodeProvisionTime the autoscaler gives them up,
// backs "a" off and asks "b".
func TestProvisionTimeoutBacksOffAndTriesNextGroup(t *testing.T) {
	p, h := preferAOverB(t, 1, 2, 1000)
	h.runOnce(t0)
	h.runOnce(t0.Add(5 * time.Minute))
	h.runOnce(t0.Add(14 * time.Minute))
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1"}) {
		t.Fatalf("before the deadline: %v", got)
	}
	h.runOnce(t0.Add(16 * time.Minute))
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1", "b+1"}) {
		t.Fatalf("after the deadline: %v, want [a+1 b+1]", got)
	}
	if d := p.CallsOf("DeleteNodes"); len(d) != 1 || d[0].Group != "a" {
		t.Fatalf("unregistered instance not deleted: %+v", d)
	}
	if ts, _ := p.Group("a").TargetSize(); ts != 0 {
		t.Fatalf("target of a = %d, want 0", ts)
	}
	cm2, _ := h.kube.CoreV1().ConfigMaps("kube-system").Get(h.ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	if s := cm2.Data["status"]; !strings.Contains(s, "status: Backoff") || !strings.Contains(s, "errorCode: timeout") {
		t.Fatalf("status does not show the backoff:\n%s", s)
	}
	// Backoff is 5 minutes: "b"'s node is also late, so at 32m it is given
	// up too and "a" (backoff over) is tried again.
	h.runOnce(t0.Add(32 * time.Minute))
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1", "b+1", "a+1"}) {
		t.Fatalf("after b's timeout: %v", got)
	}
}

func TestInstanceErrorBacksOffAtOnce(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "base", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "a", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "b", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB},
	)
	cm := &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: priority.ConfigMapName, Namespace: "kube-system"},
		Data:       map[string]string{priority.ConfigMapKey: "50:\n  - ^a$\n10:\n  - ^b$\n"},
	}
	o := testOptions()
	o.ExpanderNames = []string{"priority"}
	h := newHarness(t, o, p, join(nodes, fill(nodes, 1800), pendingPods("web", 2, 1000, test.GiB), []runtime.Object{cm})...)
	h.runOnce(t0)
	ins, _ := p.Group("a").Nodes()
	p.Group("a").SetInstanceError(ins[0].Id, &cloudprovider.InstanceErrorInfo{
		ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "no-code-digitalocean", ErrorMessage: "droplet failed"})
	h.runOnce(t0.Add(time.Minute))
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+1", "b+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [a+1 b+1]", got)
	}
}

// Failed instances count against the cluster's health; they are given up
// even when they make the cluster unhealthy, or it would stay frozen.
func TestFailedInstancesGivenUpInUnhealthyCluster(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "base", min: 3, max: 3, nodes: 3, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "a", min: 0, max: 5, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB},
	)
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800), pendingPods("web", 4, 1500, test.GiB))...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+4"}) {
		t.Fatalf("IncreaseSize calls = %v, want [a+4]", got)
	}
	failAllInstances(p, "a")
	// 4 failed instances against 3 nodes: over --ok-total-unready-count and
	// --max-total-unready-percentage.
	h.runOnce(t0.Add(time.Minute))
	if d := p.CallsOf("DeleteNodes"); len(d) != 1 || d[0].Group != "a" || len(d[0].Nodes) != 4 {
		t.Fatalf("DeleteNodes calls = %+v, want the 4 failed instances of a", d)
	}
	if ts, _ := p.Group("a").TargetSize(); ts != 0 {
		t.Fatalf("target of a = %d, want 0", ts)
	}
}

func TestIncreaseSizeErrorTriesNextGroup(t *testing.T) {
	p, nodes := cluster(
		groupSpec{id: "base", min: 1, max: 1, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "a", min: 0, max: 5, nodes: 0, milliCPU: 1000, mem: 2 * test.GiB},
		groupSpec{id: "b", min: 0, max: 5, nodes: 0, milliCPU: 4000, mem: 8 * test.GiB},
	)
	p.Group("a").InjectError("IncreaseSize", errString("quota exceeded"))
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes, 1800), pendingPods("web", 4, 500, 256*test.MiB))...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+2", "b+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [a+2 b+1]", got)
	}
	if n := countEvents(h.events(), "FailedToScaleUpGroup"); n != 1 {
		t.Fatalf("FailedToScaleUpGroup events = %d", n)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestUnhealthyClusterDoesNotScale(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 10, nodes: 5, milliCPU: 2000, mem: 4 * test.GiB})
	for _, o := range nodes[:4] {
		test.SetNodeReady(o.(*apiv1.Node), false, t0.Add(-time.Hour))
	}
	h := newHarness(t, testOptions(), p, join(nodes, fill(nodes[4:], 1800), pendingPods("web", 4, 1000, test.GiB))...)
	h.runOnce(t0)
	if got := p.Calls(); len(increases(p)) != 0 || len(sdtest.Deletions(p)) != 0 {
		t.Fatalf("calls on an unhealthy cluster: %+v", got)
	}
}

func TestPendingPodNotifiesTrigger(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "g1", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	h := newHarness(t, testOptions(), p, nodes...)
	h.createPod(test.BuildScheduledPod("running", 100, test.MiB, "", "g1-n0"))
	h.a.trigger.mu.Lock()
	notified := !h.a.trigger.first.IsZero()
	h.a.trigger.mu.Unlock()
	if notified {
		t.Fatal("a scheduled pod notified the trigger")
	}
	h.createPod(test.BuildPendingPod("new", 100, test.MiB, ""))
	h.waitCache("trigger notification", func() bool {
		h.a.trigger.mu.Lock()
		defer h.a.trigger.mu.Unlock()
		return !h.a.trigger.first.IsZero()
	})
}

// A scale-up refused at an account-wide limit (DigitalOcean's droplet
// limit) backs off every group at once: one refused request, no asking
// group after group, loop after loop; the failure is counted under its own
// reason and the status ConfigMap and an event carry the cloud's words. When
// the backoff ends and the limit was raised, the next loop scales.
func TestAccountLimitBacksOffEveryGroup(t *testing.T) {
	const words = "creating this/these droplet(s) will exceed your droplet limit"
	p, nodes := cluster(
		groupSpec{id: "g1", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "g2", min: 1, max: 10, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	objs := join(nodes, fill(nodes, 1800), pendingPods("web", 10, 500, 256*test.MiB))
	limit := &cloudprovider.AccountLimitError{Code: "dropletLimitExceeded", Message: words, Err: errString("PUT node_pools: 422 " + words)}
	p.Group("g1").InjectError("IncreaseSize", limit)
	p.Group("g2").InjectError("IncreaseSize", limit)
	value := scrape(t)
	failedLabels := map[string]string{"reason": "dropletLimitExceeded", "gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}
	before := max(0, value("failed_scale_ups_total", failedLabels))

	o := testOptions()
	h := newHarness(t, o, p, objs...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10 * time.Second))
	h.runOnce(t0.Add(o.InitialNodeGroupBackoffDuration - time.Second))
	if got := increases(p); len(got) != 1 {
		t.Fatalf("IncreaseSize calls = %v, want one: the limit is the account's", got)
	}
	if got := value("failed_scale_ups_total", failedLabels) - before; got != 1 {
		t.Errorf("failed_scale_ups_total{reason=dropletLimitExceeded} grew by %v, want 1", got)
	}
	ev := h.events()
	if n := countEvents(ev, "FailedToScaleUpGroup"); n != 1 || countEvents(ev, words) != 1 {
		t.Errorf("want one FailedToScaleUpGroup event, in DigitalOcean's words: %v", ev)
	}
	cm, err := h.kube.CoreV1().ConfigMaps("kube-system").Get(h.ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := cm.Data["status"]; strings.Count(s, words) != 2 || strings.Count(s, "status: Backoff") != 2 {
		t.Errorf("status ConfigMap should show both groups backed off with DigitalOcean's words:\n%s", s)
	}

	p.Group("g1").InjectError("IncreaseSize", nil)
	p.Group("g2").InjectError("IncreaseSize", nil)
	h.runOnce(t0.Add(o.InitialNodeGroupBackoffDuration + time.Second))
	if got := increases(p); len(got) != 2 {
		t.Fatalf("IncreaseSize calls = %v, want a second, accepted one after the backoff", got)
	}
}
