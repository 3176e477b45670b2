package report

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// An iteration's error counts in errors_total under each label its chain
// carries, once; an unlabelled one is not counted; a success is not an
// error.
func TestIterationEndedCountsLabelledErrors(t *testing.T) {
	cases := []struct {
		name                 string
		err                  error
		cloud, internal, api float64
	}{
		{"success", nil, 0, 0, 0},
		{"unlabelled", errors.New("x"), 0, 0, 0},
		{"cloud", fmt.Errorf("observe: %w", CloudProviderError(errors.New("503"))), 1, 0, 0},
		{"internal around internal", InternalError(fmt.Errorf("scale-down: %w", InternalError(errors.New("snapshot")))), 0, 2, 0},
		{"api", APICallError(errors.New("409")), 0, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			count := func(kind string) float64 {
				v, _ := f.value(t, "errors_total", map[string]string{"type": kind})
				return v
			}
			cloud, internal, api := count("cloudProviderError"), count("internalError"), count("apiCallError")
			f.r.IterationEnded(t0, time.Second, c.err)
			if d := count("cloudProviderError") - cloud; d != c.cloud {
				t.Errorf("errors_total{cloudProviderError} rose by %v, want %v", d, c.cloud)
			}
			if d := count("internalError") - internal; d != c.internal {
				t.Errorf("errors_total{internalError} rose by %v, want %v", d, c.internal)
			}
			if d := count("apiCallError") - api; d != c.api {
				t.Errorf("errors_total{apiCallError} rose by %v, want %v", d, c.api)
			}
		})
	}
}

// A provider problem is told once when it appears, and again only after
// it went away and came back; the status message follows the problems.
func TestProblemsEventedWhenTheyAppear(t *testing.T) {
	f := newFixture(t, nil)
	const p = "the token lacks tag:read"
	f.r.Problems([]string{p})
	f.r.Problems([]string{p})
	wantEvents(t, f.drain(), "Warning CloudProviderProblem "+p)
	f.r.Problems(nil)
	f.r.Problems([]string{p})
	wantEvents(t, f.drain(), "Warning CloudProviderProblem "+p)
}
