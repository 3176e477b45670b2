package simulator

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

var (
	checkerOnce sync.Once
	checker     *PredicateChecker
	checkerErr  error
)

// testChecker shares one framework between tests: building it costs
// milliseconds, and it keeps no state between calls.
func testChecker(t testing.TB) *PredicateChecker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = NewPredicateChecker() })
	if checkerErr != nil {
		t.Fatalf("NewPredicateChecker: %v", checkerErr)
	}
	return checker
}

func snapshotOf(t testing.TB, nodes []*apiv1.Node, pods []*apiv1.Pod) *ClusterSnapshot {
	t.Helper()
	s := NewClusterSnapshot()
	if err := s.SetClusterState(nodes, pods); err != nil {
		t.Fatalf("SetClusterState: %v", err)
	}
	return s
}

func TestCheckPredicatesResources(t *testing.T) {
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 2000, 4*GiB)}, []*apiv1.Pod{BoundPod("running", 1500, GiB, "n1")})

	if err := c.CheckPredicates(s, Pod("small", 500, GiB), "n1"); err != nil {
		t.Errorf("pod using the remaining 0.5 cpu should fit: %v", err)
	}
	err := c.CheckPredicates(s, Pod("big", 600, GiB), "n1")
	if err == nil {
		t.Fatalf("pod asking 0.6 cpu with 0.5 free should not fit")
	}
	if err.PluginName() != "NodeResourcesFit" {
		t.Errorf("plugin = %q, want NodeResourcesFit", err.PluginName())
	}
	if !strings.Contains(strings.Join(err.Reasons(), ","), "Insufficient cpu") {
		t.Errorf("reasons = %v, want Insufficient cpu", err.Reasons())
	}
	if err := c.CheckPredicates(s, Pod("x", 1, 1), "missing"); err == nil {
		t.Errorf("a node that is not in the snapshot must not fit")
	}
}

func TestCheckPredicatesPlugins(t *testing.T) {
	const zone = apiv1.LabelTopologyZone
	gpu := apiv1.ResourceName("nvidia.com/gpu")
	web := func(name string) *apiv1.Pod {
		p := Pod(name, 100, MiB)
		p.Labels["app"] = "web"
		return p
	}
	bound := func(p *apiv1.Pod, node string) *apiv1.Pod {
		p.Spec.NodeName = node
		p.Status.Phase = apiv1.PodRunning
		return p
	}
	// nearWeb: a pod that must run on a node with a web pod.
	nearWeb := func(name string) *apiv1.Pod {
		p := Pod(name, 100, MiB)
		p.Spec.Affinity = &apiv1.Affinity{PodAffinity: &apiv1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: apiv1.LabelHostname}}}}
		return p
	}
	cordoned := Node("cordoned", 4000, 4*GiB)
	cordoned.Spec.Unschedulable = true

	tests := []struct {
		name       string
		nodes      []*apiv1.Node
		pods       []*apiv1.Pod
		pod        *apiv1.Pod
		node       string
		wantPlugin string // "" = fits
	}{
		{name: "memory too small", nodes: []*apiv1.Node{Node("n", 4000, GiB)},
			pod: Pod("p", 100, 2*GiB), node: "n", wantPlugin: "NodeResourcesFit"},
		{name: "pod count full", nodes: func() []*apiv1.Node {
			n := Node("n", 4000, 4*GiB)
			n.Status.Allocatable[apiv1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
			return []*apiv1.Node{n}
		}(), pods: []*apiv1.Pod{BoundPod("a", 1, 1, "n")}, pod: Pod("p", 1, 1), node: "n", wantPlugin: "NodeResourcesFit"},
		{name: "node selector matches", nodes: []*apiv1.Node{WithLabel(Node("n", 4000, 4*GiB), "pool", "gpu")},
			pod: func() *apiv1.Pod {
				p := Pod("p", 100, MiB)
				p.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				return p
			}(), node: "n"},
		{name: "node selector does not match", nodes: []*apiv1.Node{WithLabel(Node("n", 4000, 4*GiB), "pool", "cpu")},
			pod: func() *apiv1.Pod {
				p := Pod("p", 100, MiB)
				p.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				return p
			}(), node: "n", wantPlugin: "NodeAffinity"},
		{name: "required node affinity does not match", nodes: []*apiv1.Node{WithLabel(Node("n", 4000, 4*GiB), zone, "ams3-a")},
			pod: func() *apiv1.Pod {
				p := Pod("p", 100, MiB)
				p.Spec.Affinity = &apiv1.Affinity{NodeAffinity: &apiv1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &apiv1.NodeSelector{
					NodeSelectorTerms: []apiv1.NodeSelectorTerm{{MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: zone, Operator: apiv1.NodeSelectorOpIn, Values: []string{"nyc1-a"}}}}},
				}}}
				return p
			}(), node: "n", wantPlugin: "NodeAffinity"},
		{name: "taint not tolerated", nodes: []*apiv1.Node{WithTaint(Node("n", 4000, 4*GiB), "dedicated", "db", apiv1.TaintEffectNoSchedule)},
			pod: Pod("p", 100, MiB), node: "n", wantPlugin: "TaintToleration"},
		{name: "taint tolerated", nodes: []*apiv1.Node{WithTaint(Node("n", 4000, 4*GiB), "dedicated", "db", apiv1.TaintEffectNoSchedule)},
			pod: func() *apiv1.Pod {
				p := Pod("p", 100, MiB)
				p.Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpEqual, Value: "db", Effect: apiv1.TaintEffectNoSchedule}}
				return p
			}(), node: "n"},
		{name: "PreferNoSchedule taint does not block", nodes: []*apiv1.Node{WithTaint(Node("n", 4000, 4*GiB), "soft", "", apiv1.TaintEffectPreferNoSchedule)},
			pod: Pod("p", 100, MiB), node: "n"},
		{name: "cordoned node", nodes: []*apiv1.Node{cordoned}, pod: Pod("p", 100, MiB), node: "cordoned", wantPlugin: "NodeUnschedulable"},
		{name: "cordoned node tolerated", nodes: []*apiv1.Node{cordoned}, pod: func() *apiv1.Pod {
			p := Pod("p", 100, MiB)
			p.Spec.Tolerations = []apiv1.Toleration{{Key: apiv1.TaintNodeUnschedulable, Operator: apiv1.TolerationOpExists, Effect: apiv1.TaintEffectNoSchedule}}
			return p
		}(), node: "cordoned"},
		{name: "host port taken", nodes: []*apiv1.Node{Node("n", 4000, 4*GiB)}, pods: []*apiv1.Pod{WithHostPort(BoundPod("a", 100, MiB, "n"), 8080)},
			pod: WithHostPort(Pod("p", 100, MiB), 8080), node: "n", wantPlugin: "NodePorts"},
		{name: "other host port free", nodes: []*apiv1.Node{Node("n", 4000, 4*GiB)}, pods: []*apiv1.Pod{WithHostPort(BoundPod("a", 100, MiB, "n"), 8080)},
			pod: WithHostPort(Pod("p", 100, MiB), 9090), node: "n"},
		{name: "gpu available", nodes: []*apiv1.Node{WithGPU(Node("n", 4000, 4*GiB), gpu, 2)}, pods: []*apiv1.Pod{WithGPURequest(BoundPod("a", 100, MiB, "n"), gpu, 1)},
			pod: WithGPURequest(Pod("p", 100, MiB), gpu, 1), node: "n"},
		{name: "gpus used up", nodes: []*apiv1.Node{WithGPU(Node("n", 4000, 4*GiB), gpu, 2)}, pods: []*apiv1.Pod{WithGPURequest(BoundPod("a", 100, MiB, "n"), gpu, 2)},
			pod: WithGPURequest(Pod("p", 100, MiB), gpu, 1), node: "n", wantPlugin: "NodeResourcesFit"},
		{name: "no gpu on node", nodes: []*apiv1.Node{Node("n", 4000, 4*GiB)},
			pod: WithGPURequest(Pod("p", 100, MiB), gpu, 1), node: "n", wantPlugin: "NodeResourcesFit"},
		{name: "anti-affinity per host refuses the same host", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB), Node("n2", 4000, 4*GiB)},
			pods: []*apiv1.Pod{bound(WithAntiAffinity(web("a"), apiv1.LabelHostname), "n1")},
			pod:  WithAntiAffinity(web("p"), apiv1.LabelHostname), node: "n1", wantPlugin: "InterPodAffinity"},
		{name: "anti-affinity per host accepts another host", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB), Node("n2", 4000, 4*GiB)},
			pods: []*apiv1.Pod{bound(WithAntiAffinity(web("a"), apiv1.LabelHostname), "n1")},
			pod:  WithAntiAffinity(web("p"), apiv1.LabelHostname), node: "n2"},
		{name: "existing pod's anti-affinity refuses the newcomer", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB)},
			pods: []*apiv1.Pod{bound(WithAntiAffinity(web("a"), apiv1.LabelHostname), "n1")},
			pod:  web("p"), node: "n1", wantPlugin: "InterPodAffinity"},
		{name: "anti-affinity per zone", nodes: []*apiv1.Node{WithLabel(Node("n1", 4000, 4*GiB), zone, "a"), WithLabel(Node("n2", 4000, 4*GiB), zone, "a")},
			pods: []*apiv1.Pod{bound(WithAntiAffinity(web("a"), zone), "n1")},
			pod:  WithAntiAffinity(web("p"), zone), node: "n2", wantPlugin: "InterPodAffinity"},
		{name: "pod affinity satisfied", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB)},
			pods: []*apiv1.Pod{bound(web("a"), "n1")},
			pod:  nearWeb("p"), node: "n1"},
		{name: "pod affinity unsatisfied", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB), Node("n2", 4000, 4*GiB)},
			pods: []*apiv1.Pod{bound(web("a"), "n1")},
			pod:  nearWeb("p"), node: "n2", wantPlugin: "InterPodAffinity"},
		{name: "zone spread skew exceeded", nodes: []*apiv1.Node{WithLabel(Node("a1", 4000, 4*GiB), zone, "a"), WithLabel(Node("b1", 4000, 4*GiB), zone, "b")},
			pods: []*apiv1.Pod{bound(web("w1"), "a1")},
			pod:  WithTopologySpread(web("p"), zone, 1), node: "a1", wantPlugin: "PodTopologySpread"},
		{name: "zone spread skew kept", nodes: []*apiv1.Node{WithLabel(Node("a1", 4000, 4*GiB), zone, "a"), WithLabel(Node("b1", 4000, 4*GiB), zone, "b")},
			pods: []*apiv1.Pod{bound(web("w1"), "a1")},
			pod:  WithTopologySpread(web("p"), zone, 1), node: "b1"},
		{name: "zone spread maxSkew 2 allows imbalance", nodes: []*apiv1.Node{WithLabel(Node("a1", 4000, 4*GiB), zone, "a"), WithLabel(Node("b1", 4000, 4*GiB), zone, "b")},
			pods: []*apiv1.Pod{bound(web("w1"), "a1")},
			pod:  WithTopologySpread(web("p"), zone, 2), node: "a1"},
		{name: "hostname spread", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB), Node("n2", 4000, 4*GiB)},
			pods: []*apiv1.Pod{bound(web("w1"), "n1")},
			pod:  WithTopologySpread(web("p"), apiv1.LabelHostname, 1), node: "n1", wantPlugin: "PodTopologySpread"},
		{name: "spread needs the topology label", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB)},
			pod: WithTopologySpread(web("p"), zone, 1), node: "n1", wantPlugin: "PodTopologySpread"},
		{name: "spec.nodeName elsewhere", nodes: []*apiv1.Node{Node("n1", 4000, 4*GiB), Node("n2", 4000, 4*GiB)},
			pod: func() *apiv1.Pod { p := Pod("p", 100, MiB); p.Spec.NodeName = "n2"; return p }(), node: "n1", wantPlugin: "NodeName"},
	}
	c := testChecker(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf(t, tc.nodes, tc.pods)
			err := c.CheckPredicates(s, tc.pod, tc.node)
			switch {
			case tc.wantPlugin == "" && err != nil:
				t.Errorf("want fit, got %v", err)
			case tc.wantPlugin != "" && err == nil:
				t.Errorf("want rejection by %s, got fit", tc.wantPlugin)
			case tc.wantPlugin != "" && err.PluginName() != tc.wantPlugin:
				t.Errorf("rejected by %q (%v), want %s", err.PluginName(), err, tc.wantPlugin)
			}
		})
	}
}

func TestFitsAnyNodeMatching(t *testing.T) {
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{Node("a", 1000, GiB), Node("b", 4000, 4*GiB), Node("c", 4000, 4*GiB)}, nil)
	name, err := c.FitsAnyNodeMatching(s, Pod("p", 2000, MiB), nil)
	if err != nil || name != "b" {
		t.Errorf("got %q, %v; want b (first node with room in name order)", name, err)
	}
	name, err = c.FitsAnyNodeMatching(s, Pod("p", 2000, MiB), func(ni *framework.NodeInfo) bool { return ni.Node().Name != "b" })
	if err != nil || name != "c" {
		t.Errorf("with b excluded got %q, %v; want c", name, err)
	}
	if _, err = c.FitsAnyNodeMatching(s, Pod("p", 8000, MiB), nil); err == nil {
		t.Errorf("an 8-cpu pod fits none of these nodes")
	} else if !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("error should tell why: %v", err)
	}
	fit, rejected, err := c.FitsAnyNodeOf(s, Pod("p", 2000, MiB), []string{"a", "missing", "c", "b"})
	if err != nil || fit != "c" || !reflect.DeepEqual(rejected, []string{"a"}) {
		t.Errorf("FitsAnyNodeOf = %q %v %v; want c [a] nil", fit, rejected, err)
	}
}
