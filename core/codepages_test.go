package core

import (
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/internal/codepages"
)

// The code pages are released after the first iteration and then at most
// hourly, not after every iteration (each release makes the next loop map
// back what it runs); an executable that cannot be released is not tried
// again.
func TestReleaseCodePagesCadence(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)
	iterations := []time.Duration{0, 10 * time.Second, 59 * time.Minute, time.Hour, time.Hour + 10*time.Second, 2*time.Hour + time.Second}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{name: "released at start-up, 1h and 2h", want: 3},
		{name: "unsupported executable: tried once", err: codepages.ErrUnsupported, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			c := &codePages{release: func() (int64, error) { calls++; return 43 << 20, tc.err }}
			for _, d := range iterations {
				c.afterIteration(t0.Add(d))
			}
			if calls != tc.want {
				t.Errorf("%d releases after iterations at %v, want %d", calls, iterations, tc.want)
			}
		})
	}
}
