package core

import (
	"strings"
	"testing"
	"time"
)

// A consolidation replacement is bought under --max-hourly-cost like any
// node: make before break, both nodes billed while the pods move. Spend
// here is $10/h (big $8, small $2); the replacement costs $2.
func TestConsolidationReplacementStaysUnderMaxHourlyCost(t *testing.T) {
	for _, tc := range []struct {
		limit float64
		want  string
	}{{10, ""}, {11.9, ""}, {12, "small+1"}} {
		h, _ := consolidationCluster(t)
		h.a.opts.MaxHourlyCost = tc.limit
		h.runOnce(t0)
		h.runOnce(t0.Add(61 * time.Second))
		if incs := strings.Join(increases(h.provider), ","); incs != tc.want {
			t.Fatalf("--max-hourly-cost=%v: increases %q, want %q", tc.limit, incs, tc.want)
		}
	}
}

// A replacement whose size is held unavailable (no capacity, nodes that
// never came) is not chosen: no request is sent for it.
func TestConsolidationSkipsAnUnavailableReplacement(t *testing.T) {
	h, _ := consolidationCluster(t)
	h.provider.Group("small").SetUnavailable("size small unavailable until later: out of stock")
	h.runOnce(t0)
	h.runOnce(t0.Add(61 * time.Second))
	if incs := increases(h.provider); len(incs) != 0 {
		t.Fatalf("increases %v into an unavailable size", incs)
	}
}
