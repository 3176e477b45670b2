package core

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// --enforce-node-group-min-size raises a group whose target is below its
// min size to it, with no pending pod; without the flag it is left alone.
func TestEnforceNodeGroupMinSize(t *testing.T) {
	for _, enforce := range []bool{true, false} {
		p, nodes := cluster(
			groupSpec{id: "g1", min: 1, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
			groupSpec{id: "low", min: 3, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		)
		o := testOptions()
		o.EnforceNodeGroupMinSize = enforce
		h := newHarness(t, o, p, join(nodes, fill(nodes, 1800))...)
		h.runOnce(t0)
		h.runOnce(t0.Add(10 * time.Second))
		var want []string
		if enforce {
			want = []string{"low+2"}
		}
		if got := increases(p); !reflect.DeepEqual(got, want) {
			t.Fatalf("enforce=%v: IncreaseSize calls = %v, want %v", enforce, got, want)
		}
		if enforce && countEvents(h.events(), "ScaledUpGroup Scale-up: setting group low size to 3 instead of 1 (max: 5)") != 1 {
			t.Fatal("no ScaledUpGroup event")
		}
	}
}

// The raise respects --max-nodes-total, and a backed-off group waits.
func TestEnforceNodeGroupMinSizeLimits(t *testing.T) {
	p, nodes := cluster(groupSpec{id: "low", min: 4, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	o := testOptions()
	o.EnforceNodeGroupMinSize = true
	o.MaxNodesTotal = 3
	h := newHarness(t, o, p, join(nodes, fill(nodes, 1800))...)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"low+2"}) {
		t.Fatalf("IncreaseSize calls = %v, want [low+2] (--max-nodes-total=3)", got)
	}

	p2, nodes2 := cluster(groupSpec{id: "low", min: 3, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	p2.Group("low").InjectError("IncreaseSize", errString("quota exceeded"))
	o2 := testOptions()
	o2.EnforceNodeGroupMinSize = true
	h2 := newHarness(t, o2, p2, join(nodes2, fill(nodes2, 1800))...)
	h2.runOnce(t0)
	h2.runOnce(t0.Add(time.Minute))
	if got := increases(p2); len(got) != 1 || !strings.HasPrefix(got[0], "low+") {
		t.Fatalf("IncreaseSize calls = %v, want one attempt, then the backoff", got)
	}
}
