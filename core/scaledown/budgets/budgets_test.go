package budgets

import "testing"

func TestBudgets(t *testing.T) {
	cases := []struct {
		name                  string
		maxAll, maxDrain      int
		inFlight, draining    int
		wantTotal, wantDrains int
		drain                 bool
		picked, pickedDrains  int
		wantWait              string
	}{
		{"nothing in flight", 10, 1, 0, 0, 10, 1, true, 0, 0, ""},
		{"a drain in flight uses the drain budget", 10, 1, 1, 1, 9, 0, true, 0, 0, "max-drain-parallelism"},
		{"an empty node still fits beside a drain", 10, 1, 1, 1, 9, 0, false, 0, 0, ""},
		{"the total budget caps the drains", 2, 5, 1, 0, 1, 1, false, 1, 0, "max-scale-down-parallelism"},
		{"more in flight than allowed: no budget, never negative", 2, 1, 4, 3, 0, 0, false, 0, 0, "max-scale-down-parallelism"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(c.maxAll, c.maxDrain, c.inFlight, c.draining)
			if b.Total != c.wantTotal || b.Drains != c.wantDrains {
				t.Fatalf("budgets = %d total, %d drains; want %d, %d", b.Total, b.Drains, c.wantTotal, c.wantDrains)
			}
			if got := b.Wait(c.drain, c.picked, c.pickedDrains); got != c.wantWait {
				t.Fatalf("Wait = %q, want %q", got, c.wantWait)
			}
		})
	}
}
