package clusterstate

import (
	"time"
)

// Backoff keeps node groups whose scale-up failed out of scale-ups for a
// while. The pause doubles with each failure (initial, 2×initial, … up to
// max) and starts again from initial once a group has gone resetTimeout
// without failing.
type Backoff struct {
	initial, max, reset time.Duration
	entries             map[string]*backoffEntry
}

type backoffEntry struct {
	duration    time.Duration
	until       time.Time
	lastFailure time.Time
	info        BackoffInfo
}

// BackoffInfo says why a group is backed off.
type BackoffInfo struct {
	ErrorCode    string
	ErrorMessage string
}

// NewBackoff returns an empty backoff with the given durations.
func NewBackoff(initial, maxDuration, resetTimeout time.Duration) *Backoff {
	if maxDuration < initial {
		maxDuration = initial
	}
	return &Backoff{initial: initial, max: maxDuration, reset: resetTimeout, entries: map[string]*backoffEntry{}}
}

// Backoff records a failure of group id at now and returns when the
// backoff ends.
func (b *Backoff) Backoff(id string, info BackoffInfo, now time.Time) time.Time {
	e := b.entries[id]
	d := b.initial
	if e != nil && now.Sub(e.lastFailure) < b.reset {
		d = e.duration * 2
		if d > b.max {
			d = b.max
		}
		if d < b.initial {
			d = b.initial
		}
	}
	b.entries[id] = &backoffEntry{duration: d, until: now.Add(d), lastFailure: now, info: info}
	return now.Add(d)
}

// BackedOff reports whether group id is backed off at now, why, and until when.
func (b *Backoff) BackedOff(id string, now time.Time) (bool, BackoffInfo, time.Time) {
	e := b.entries[id]
	if e == nil || !now.Before(e.until) {
		return false, BackoffInfo{}, time.Time{}
	}
	return true, e.info, e.until
}

// Remove forgets group id's failures (a scale-up of it succeeded).
func (b *Backoff) Remove(id string) { delete(b.entries, id) }

// Cleanup drops entries that no longer affect anything.
func (b *Backoff) Cleanup(now time.Time) {
	for id, e := range b.entries {
		if now.Sub(e.lastFailure) >= b.reset && !now.Before(e.until) {
			delete(b.entries, id)
		}
	}
}
