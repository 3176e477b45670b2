package consolidation

import "time"

// Stabilizer holds a command back until it has been proposed, unchanged,
// for a window: a command proposed in one loop and not the next (the load
// moved) never acts, so consolidation does not flap against scale-up.
// Karpenter's queue waits and validates again the same way.
type Stabilizer struct {
	window time.Duration
	key    string
	since  time.Time
}

// NewStabilizer returns a stabilizer over window.
func NewStabilizer(window time.Duration) *Stabilizer { return &Stabilizer{window: window} }

// Observe records the command proposed at now (nil: none) and reports
// whether it is new (first proposed now) and whether it has held for the
// window, so it may act.
func (s *Stabilizer) Observe(cmd *Command, now time.Time) (isNew, ready bool) {
	if cmd == nil {
		s.Reset()
		return false, false
	}
	if k := cmd.Key(); k != s.key {
		s.key, s.since, isNew = k, now, true
	}
	return isNew, now.Sub(s.since) >= s.Window(cmd)
}

// Window is how long cmd must hold: the stabilization window, and for a
// delete at least its nodes' --scale-down-unneeded-time. A node deleted
// outright is one scale-down would remove if it were below the
// utilization threshold; it is not removed sooner than scale-down would
// remove it, which is the wait that keeps nodes the load comes back to.
func (s *Stabilizer) Window(cmd *Command) time.Duration {
	w := s.window
	if cmd.Kind == Delete {
		for _, c := range cmd.Remove {
			w = max(w, c.UnneededTime)
		}
	}
	return w
}

// Key is the key of the command held ("" for none).
func (s *Stabilizer) Key() string { return s.key }

// Since is when the command held now was first proposed (zero: none).
func (s *Stabilizer) Since() time.Time { return s.since }

// Reset forgets the command held: the next one starts its window anew.
func (s *Stabilizer) Reset() { s.key, s.since = "", time.Time{} }
