package consolidation

import (
	"testing"
	"time"

	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
)

// A command acts once proposed unchanged for the stabilization window; a
// delete also waits its nodes' --scale-down-unneeded-time, so it never
// removes a node sooner than scale-down would; a replace does not.
func TestStabilizerWindow(t *testing.T) {
	c := newCluster()
	c.node("a", 4000, 1, 1000)
	cand := c.candidates("a")[0]
	cand.UnneededTime = 10 * time.Minute
	for _, tc := range []struct {
		kind  Kind
		ready time.Duration
	}{{Delete, 10 * time.Minute}, {Replace, 5 * time.Minute}} {
		s := NewStabilizer(5 * time.Minute)
		cmd := &Command{Kind: tc.kind, Remove: []Candidate{cand}}
		if tc.kind == Replace {
			r := replacement("small", 2000, 0.5)
			cmd.Replacement, cmd.Count = &r, 1
		}
		if isNew, ready := s.Observe(cmd, sdtest.T0); !isNew || ready {
			t.Fatalf("%s: first proposal new %v ready %v, want new, not ready", tc.kind, isNew, ready)
		}
		if _, ready := s.Observe(cmd, sdtest.T0.Add(tc.ready-time.Second)); ready {
			t.Fatalf("%s: ready after %s, want after %s", tc.kind, tc.ready-time.Second, tc.ready)
		}
		if _, ready := s.Observe(cmd, sdtest.T0.Add(tc.ready)); !ready {
			t.Fatalf("%s: not ready after %s", tc.kind, tc.ready)
		}
	}
}
