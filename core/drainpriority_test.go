package core

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// --drain-priority-config: a drained node's pods go lowest priority group
// first, each with its group's grace period, as upstream.
func TestDrainInPriorityOrder(t *testing.T) {
	p, objs, light := scaleDownFixture(1)
	light.Spec.Priority = ptr.To[int32](2000)
	light.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600)
	low := test.BuildScheduledPod("low", 100, test.MiB, "rs-low", "g1-n1")
	low.Spec.Priority = ptr.To[int32](10)
	low.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600)
	o := testOptions()
	var err error
	if o.DrainPriorities, err = config.ParseDrainPriorityConfig("1000:20,0:5"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, o, p, append(objs, runtime.Object(low))...)
	h.runOnce(t0)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	if got := h.evicts.Evictions(); len(got) != 2 || got[0] != "default/low" || got[1] != "default/light" {
		t.Fatalf("evictions = %v, want default/low (priority 10) before default/light (2000)", got)
	}
	lowGrace, _ := h.evicts.Grace("default/low")
	lightGrace, _ := h.evicts.Grace("default/light")
	if lowGrace != 5 || lightGrace != 20 {
		t.Fatalf("grace periods = low %ds, light %ds, want low 5s (group 0) and light 20s (group 1000)", lowGrace, lightGrace)
	}
}
