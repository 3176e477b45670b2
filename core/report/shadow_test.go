package report

import (
	"fmt"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/doks-autoscaler/cluster-autoscaler/internal/shadowkube"
)

type recorded struct {
	ann                     map[string]string
	eventtype, reason, text string
}

type captureRecorder struct{ got []recorded }

func (c *captureRecorder) Event(_ runtime.Object, eventtype, reason, message string) {
	c.got = append(c.got, recorded{nil, eventtype, reason, message})
}
func (c *captureRecorder) Eventf(_ runtime.Object, eventtype, reason, f string, args ...interface{}) {
	c.got = append(c.got, recorded{nil, eventtype, reason, fmt.Sprintf(f, args...)})
}
func (c *captureRecorder) AnnotatedEventf(_ runtime.Object, ann map[string]string, eventtype, reason, f string, args ...interface{}) {
	c.got = append(c.got, recorded{ann, eventtype, reason, fmt.Sprintf(f, args...)})
}

func TestEventsAreMarkedReasonsKept(t *testing.T) {
	c := &captureRecorder{}
	r := ShadowEvents(c)
	pod := &apiv1.Pod{}
	r.Event(pod, apiv1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: [{g 0->1 (max: 3)}] 100%")
	r.Eventf(pod, apiv1.EventTypeNormal, "ScaleDown", "deleting node %s", "n1")
	r.AnnotatedEventf(pod, map[string]string{"k": "v"}, apiv1.EventTypeWarning, "ConsolidationPlanned", "%d nodes", 2)
	want := []recorded{
		{eventtype: "Normal", reason: "TriggeredScaleUp", text: "[shadow] pod triggered scale-up: [{g 0->1 (max: 3)}] 100%"},
		{eventtype: "Normal", reason: "ScaleDown", text: "[shadow] deleting node n1"},
		{eventtype: "Warning", reason: "ConsolidationPlanned", text: "[shadow] 2 nodes"},
	}
	for i, w := range want {
		g := c.got[i]
		if g.eventtype != w.eventtype || g.reason != w.reason || g.text != w.text || g.ann[shadowkube.Annotation] != "true" {
			t.Errorf("event %d: %+v, want %+v with the annotation", i, g, w)
		}
	}
	if c.got[2].ann["k"] != "v" {
		t.Errorf("the caller's annotations were lost: %v", c.got[2].ann)
	}
}

func TestShadowMetrics(t *testing.T) {
	f := newFixture(t, nil)
	labels := map[string]string{"api": shadowkube.APICloud, "operation": "CreateNodePool"}
	before, _ := f.value(t, "shadow_writes_total", labels)
	Shadow{}.WriteHeld(shadowkube.APICloud, "CreateNodePool")
	if v, _ := f.value(t, "shadow_writes_total", labels); v != before+1 {
		t.Errorf("shadow_writes_total{api=cloud} rose by %v, want 1", v-before)
	}
	Shadow{}.ShadowMode(true)
	if v, _ := f.value(t, "shadow_mode", nil); v != 1 {
		t.Errorf("shadow_mode = %v, want 1", v)
	}
	Shadow{}.ShadowMode(false)
	if v, _ := f.value(t, "shadow_mode", nil); v != 0 {
		t.Errorf("shadow_mode = %v, want 0", v)
	}
}
