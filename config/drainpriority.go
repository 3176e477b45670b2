package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// DrainPriority is one rule of --drain-priority-config: pods of this
// priority and up (to the next rule's) are evicted together, with at most
// GracePeriodSeconds to terminate, after every lower group has gone.
type DrainPriority struct {
	Priority           int32
	GracePeriodSeconds int64
}

// ParseDrainPriorityConfig reads upstream's "priority:seconds,..." list,
// returned in ascending priority (the eviction order).
func ParseDrainPriorityConfig(s string) ([]DrainPriority, error) {
	var out []DrainPriority
	for _, item := range strings.Split(s, ",") {
		prio, secs, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, fmt.Errorf("%q is not a priority:gracePeriodSeconds pair", item)
		}
		p, err := strconv.ParseInt(prio, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: priority %q is not a 32-bit integer", item, prio)
		}
		g, err := strconv.ParseInt(secs, 10, 64)
		if err != nil || g < 0 {
			return nil, fmt.Errorf("%q: grace period %q is not a number of seconds", item, secs)
		}
		out = append(out, DrainPriority{Priority: int32(p), GracePeriodSeconds: g})
	}
	slices.SortStableFunc(out, func(a, b DrainPriority) int { return int(int64(a.Priority) - int64(b.Priority)) })
	return out, nil
}

// DrainGroups are the eviction groups of a drain: --drain-priority-config's,
// or without it one group for every pod, bounded by
// --max-graceful-termination-sec (upstream's single rule).
func (o AutoscalingOptions) DrainGroups() []DrainPriority {
	if len(o.DrainPriorities) > 0 {
		return o.DrainPriorities
	}
	return []DrainPriority{{Priority: math.MaxInt32, GracePeriodSeconds: int64(o.MaxGracefulTerminationSec)}}
}
