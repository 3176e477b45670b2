package core

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Trigger decides when the next iteration starts: every scan interval, and
// sooner when new pods become unschedulable. New pending pods are batched:
// the iteration starts once no new one has appeared for the idle window,
// or when the max window since the first one has passed, so a Deployment
// scaled to 500 replicas costs one iteration, not 500.
type Trigger struct {
	clock     clock.Clock
	idle, max time.Duration
	frequent  bool

	mu          sync.Mutex
	first, last time.Time // zero: nothing pending
	wake        chan struct{}
	kick        chan struct{}
}

// NewTrigger returns a trigger. With frequent false only the interval
// counts (--frequent-loops-enabled=false).
func NewTrigger(c clock.Clock, idle, maxWait time.Duration, frequent bool) *Trigger {
	if maxWait < idle {
		maxWait = idle
	}
	return &Trigger{clock: c, idle: idle, max: maxWait, frequent: frequent, wake: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
}

// Notify records that a pod became unschedulable.
func (t *Trigger) Notify() {
	if !t.frequent {
		return
	}
	t.mu.Lock()
	now := t.clock.Now()
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Kick starts the next iteration at once: a node removal ended, and the
// nodes waiting for its budget need not wait for the interval.
func (t *Trigger) Kick() {
	if !t.frequent {
		return
	}
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Wake reasons returned by Wait.
const (
	WakeInterval = "interval"
	WakePods     = "unschedulable pods"
	WakeSoon     = "follow-up after acting"
	WakeRemoval  = "a node removal ended"
	WakeDone     = "stopped"
)

// Wait blocks until the next iteration should start: interval after the
// call, when pending pods have settled, or at a Kick. With soon (the last iteration
// changed the cluster) it returns after the idle window instead, to see
// the effect quickly.
func (t *Trigger) Wait(ctx context.Context, interval time.Duration, soon bool) string {
	start := t.clock.Now()
	if interval <= 0 {
		interval = time.Second // never spin on a zero --scan-interval
	}
	if soon && t.frequent && t.idle < interval {
		interval = t.idle
		defer t.clear()
		timer := t.clock.NewTimer(interval)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return WakeDone
		case <-t.kick:
			return WakeRemoval
		case <-timer.C():
			return WakeSoon
		}
	}
	for {
		deadline := start.Add(interval)
		reason := WakeInterval
		t.mu.Lock()
		if !t.first.IsZero() {
			fire := t.last.Add(t.idle)
			if m := t.first.Add(t.max); m.Before(fire) {
				fire = m
			}
			if fire.Before(deadline) {
				deadline, reason = fire, WakePods
			}
		}
		t.mu.Unlock()
		d := deadline.Sub(t.clock.Now())
		if d <= 0 {
			t.clear()
			return reason
		}
		timer := t.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return WakeDone
		case <-t.kick:
			timer.Stop()
			t.clear()
			return WakeRemoval
		case <-t.wake:
			timer.Stop() // recompute with the new pod's time
		case <-timer.C():
			t.clear()
			return reason
		}
	}
}

// clear forgets pending pods: the iteration about to start sees them all.
func (t *Trigger) clear() {
	t.mu.Lock()
	t.first, t.last = time.Time{}, time.Time{}
	t.mu.Unlock()
	select {
	case <-t.wake:
	default:
	}
}
