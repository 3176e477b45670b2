package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestHealthCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	const (
		maxInactivity = 10 * time.Minute
		maxFailing    = 15 * time.Minute
	)
	tests := []struct {
		name string
		// start: whether StartMonitoring is called (at t0).
		start bool
		// activity / success: offsets from t0 of the last updates (<0 = none).
		activity, success time.Duration
		// at: offset from t0 of the probe.
		at       time.Duration
		wantCode int
		wantBody string
	}{
		{name: "before monitoring, long after start-up", start: false, activity: -1, success: -1, at: 2 * time.Hour, wantCode: 200, wantBody: "OK"},
		{name: "just started, no loop yet", start: true, activity: -1, success: -1, at: time.Minute, wantCode: 200, wantBody: "OK"},
		{name: "first loop never ran within max inactivity", start: true, activity: -1, success: -1, at: 11 * time.Minute, wantCode: 500, wantBody: "last activity more than 10m0s ago"},
		{name: "loop running and succeeding", start: true, activity: 20 * time.Minute, success: 20 * time.Minute, at: 21 * time.Minute, wantCode: 200, wantBody: "OK"},
		{name: "loop stuck", start: true, activity: 20 * time.Minute, success: 20 * time.Minute, at: 31 * time.Minute, wantCode: 500, wantBody: "last activity more than 10m0s ago"},
		{name: "loop keeps failing, within max failing", start: true, activity: 14 * time.Minute, success: -1, at: 14*time.Minute + 30*time.Second, wantCode: 200, wantBody: "OK"},
		{name: "loop keeps failing past max failing", start: true, activity: 16 * time.Minute, success: -1, at: 16*time.Minute + 10*time.Second, wantCode: 500, wantBody: "last successful run more than 15m0s ago"},
		{name: "exactly at the inactivity limit is still healthy", start: true, activity: 0, success: 0, at: maxInactivity, wantCode: 200, wantBody: "OK"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHealthCheck(maxInactivity, maxFailing)
			clock := testingclock.NewFakePassiveClock(t0)
			h.clock = clock
			if tc.start {
				h.StartMonitoring()
			}
			if tc.activity >= 0 {
				h.UpdateLastActivity(t0.Add(tc.activity))
			}
			if tc.success >= 0 {
				h.UpdateLastSuccessfulRun(t0.Add(tc.success))
			}
			clock.SetTime(t0.Add(tc.at))

			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health-check", nil))
			if rec.Code != tc.wantCode {
				t.Errorf("status = %d, want %d (body %q)", rec.Code, tc.wantCode, rec.Body.String())
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body = %q, want it to contain %q", rec.Body.String(), tc.wantBody)
			}
		})
	}
}

func TestHealthCheckUpdatesNeverGoBackwards(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h := NewHealthCheck(time.Minute, time.Minute)
	clock := testingclock.NewFakePassiveClock(t0)
	h.clock = clock
	h.StartMonitoring()
	h.UpdateLastSuccessfulRun(t0.Add(5 * time.Minute))
	// A late report from an older loop must not make a healthy process look stuck.
	h.UpdateLastActivity(t0.Add(time.Minute))
	h.UpdateLastSuccessfulRun(t0.Add(time.Minute))
	clock.SetTime(t0.Add(5*time.Minute + 30*time.Second))
	if err := h.check(); err != nil {
		t.Fatalf("unhealthy after out-of-order updates: %v", err)
	}
}

func TestHealthCheckStartIgnoresStartupTime(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h := NewHealthCheck(10*time.Minute, 15*time.Minute)
	clock := testingclock.NewFakePassiveClock(t0)
	h.clock = clock
	// Waiting an hour for the leader lease, then starting the loop.
	clock.SetTime(t0.Add(time.Hour))
	h.StartMonitoring()
	clock.SetTime(clock.Now().Add(5 * time.Minute))
	if err := h.check(); err != nil {
		t.Fatalf("unhealthy 5m after monitoring started: %v", err)
	}
}
