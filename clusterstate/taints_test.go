package clusterstate

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

func TestTaintConfig(t *testing.T) {
	o := config.Defaults()
	o.StartupTaints = []string{"node.cilium.io/agent-not-ready"}
	o.StatusTaints = []string{"example.com/degraded"}
	o.StartupTaintPrefixes = []string{"startup-taint.example.com/"}
	c := NewTaintConfig(o)
	cases := []struct {
		key             string
		startup, status bool
	}{
		{"node.cilium.io/agent-not-ready", true, false},
		{StartupTaintPrefix + "csi", true, false},
		{IgnoreTaintPrefix + "csi", true, false},
		{"example.com/degraded", false, true},
		{StatusTaintPrefix + "gpu", false, true},
		{"dedicated", false, false},
		{ToBeDeletedTaint, false, false},
		{"node.cilium.io/agent-not-ready-extra", false, false},
		{"startup-taint.example.com/csi", true, false},
		{"example.com/csi", false, false},
	}
	for _, tc := range cases {
		if got := c.IsStartupTaint(tc.key); got != tc.startup {
			t.Errorf("IsStartupTaint(%q) = %v, want %v", tc.key, got, tc.startup)
		}
		if got := c.IsStatusTaint(tc.key); got != tc.status {
			t.Errorf("IsStatusTaint(%q) = %v, want %v", tc.key, got, tc.status)
		}
	}
}

func TestWithoutTransientTaints(t *testing.T) {
	c := NewTaintConfig(config.Defaults())
	plain := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: apiv1.NodeSpec{Taints: []apiv1.Taint{{Key: "dedicated", Effect: apiv1.TaintEffectNoSchedule}}}}
	if got := c.WithoutTransientTaints(plain); got != plain {
		t.Error("a node without transient taints was copied")
	}
	if c.HasStartupTaint(plain) {
		t.Error("HasStartupTaint on a node without one")
	}
	mixed := plain.DeepCopy()
	mixed.Spec.Taints = append(mixed.Spec.Taints,
		apiv1.Taint{Key: StartupTaintPrefix + "csi", Effect: apiv1.TaintEffectNoSchedule},
		apiv1.Taint{Key: StatusTaintPrefix + "gpu", Effect: apiv1.TaintEffectNoSchedule})
	if !c.HasStartupTaint(mixed) {
		t.Error("HasStartupTaint missed the prefixed taint")
	}
	got := c.WithoutTransientTaints(mixed)
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints left %v, want only dedicated", got.Spec.Taints)
	}
	if len(mixed.Spec.Taints) != 3 {
		t.Error("the caller's node was changed")
	}
}
