package cloudprovider

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

func TestCarriedKey(t *testing.T) {
	ml := apiv1.Taint{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule}
	gpu := apiv1.Taint{Key: "nvidia.com/gpu", Effect: apiv1.TaintEffectNoSchedule}
	cases := []struct {
		name string
		a, b Carried
		same bool
	}{
		{"none", Carried{}, Carried{Labels: map[string]string{}}, true},
		{"labels in any order", Carried{Labels: map[string]string{"team": "a", "x": "y"}}, Carried{Labels: map[string]string{"x": "y", "team": "a"}}, true},
		{"taints in any order", Carried{Taints: []apiv1.Taint{ml, gpu}}, Carried{Taints: []apiv1.Taint{gpu, ml}}, true},
		{"another label value", Carried{Labels: map[string]string{"team": "a"}}, Carried{Labels: map[string]string{"team": "b"}}, false},
		{"a label is no taint", Carried{Labels: map[string]string{"dedicated": "ml"}},
			Carried{Labels: map[string]string{"dedicated": "ml"}, Taints: []apiv1.Taint{ml}}, false},
		{"another effect", Carried{Taints: []apiv1.Taint{ml}},
			Carried{Taints: []apiv1.Taint{{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoExecute}}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if same := c.a.Key() == c.b.Key(); same != c.same {
				t.Fatalf("keys %q and %q: same %v, want %v", c.a.Key(), c.b.Key(), same, c.same)
			}
		})
	}
	if k := (Carried{}).Key(); k != "" {
		t.Errorf("key of nothing carried = %q, want empty", k)
	}
}
