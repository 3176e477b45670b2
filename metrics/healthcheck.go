package metrics

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// HealthCheck answers the liveness probe on /health-check. Before monitoring
// starts (informer sync, leader election) it always reports healthy, so a
// replica waiting for the lease is not restarted. Once started it fails when
// the loop has not run for maxInactivity (stuck) or has not succeeded for
// maxFailing (keeps failing), so the kubelet restarts the pod.
type HealthCheck struct {
	mu                sync.Mutex
	monitoring        bool
	lastActivity      time.Time
	lastSuccessfulRun time.Time
	maxInactivity     time.Duration
	maxFailing        time.Duration

	// clock tells the probe's time; tests replace it.
	clock clock.PassiveClock
}

// NewHealthCheck builds a HealthCheck with the given thresholds.
func NewHealthCheck(maxInactivity, maxFailing time.Duration) *HealthCheck {
	return &HealthCheck{maxInactivity: maxInactivity, maxFailing: maxFailing, clock: clock.RealClock{}}
}

// StartMonitoring turns the checks on. Both timestamps restart from now so the
// time spent before the first loop (start-up, waiting for the lease) does not
// count against the thresholds.
func (h *HealthCheck) StartMonitoring() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	h.monitoring = true
	if now.After(h.lastActivity) {
		h.lastActivity = now
	}
	if now.After(h.lastSuccessfulRun) {
		h.lastSuccessfulRun = now
	}
	klog.V(1).InfoS("Health check monitoring started", "maxInactivity", h.maxInactivity, "maxFailingTime", h.maxFailing)
}

// UpdateLastActivity records that the loop ran (whatever its outcome).
func (h *HealthCheck) UpdateLastActivity(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.After(h.lastActivity) {
		h.lastActivity = now
	}
}

// UpdateLastSuccessfulRun records a loop that finished without error; a
// successful run is also activity.
func (h *HealthCheck) UpdateLastSuccessfulRun(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.After(h.lastSuccessfulRun) {
		h.lastSuccessfulRun = now
	}
	if now.After(h.lastActivity) {
		h.lastActivity = now
	}
}

// check returns nil when healthy, else why not.
func (h *HealthCheck) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.monitoring {
		return nil
	}
	now := h.clock.Now()
	if since := now.Sub(h.lastActivity); since > h.maxInactivity {
		return fmt.Errorf("last activity more than %v ago: %v", h.maxInactivity, h.lastActivity.Format(time.RFC3339))
	}
	if since := now.Sub(h.lastSuccessfulRun); since > h.maxFailing {
		return fmt.Errorf("last successful run more than %v ago: %v", h.maxFailing, h.lastSuccessfulRun.Format(time.RFC3339))
	}
	return nil
}

// ServeHTTP answers 200 "OK" when healthy and 500 with the reason otherwise.
func (h *HealthCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := h.check(); err != nil {
		klog.ErrorS(err, "Health check failed")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, "Error: %v", err)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("OK"))
}
