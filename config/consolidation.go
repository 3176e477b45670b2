package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ConsolidationOptions configure consolidation (docs/consolidation.md):
// moving pods off nodes so that cheaper ones, or fewer, hold them. These
// are this project's own flags; upstream has no consolidation.
type ConsolidationOptions struct {
	// Enabled turns consolidation on (--consolidation-enabled).
	Enabled bool
	// SavingsThreshold: a command acts only when it saves more than this
	// fraction of the replaced nodes' hourly price.
	SavingsThreshold float64
	// StabilizationWindow: a command must be proposed, unchanged, for this
	// long before it acts, and no scale-up may have happened within it.
	StabilizationWindow time.Duration
	// MaxDisrupted bounds the nodes under consolidation at once.
	MaxDisrupted DisruptionBudget
	// Windows are when consolidation may start a command (UTC); none
	// means at any time.
	Windows []Window
	// SavingHorizon is the longest a command's saving is counted over when
	// it is weighed against the disruption it causes; the horizon used is
	// the shorter of this and how long savings have lasted in this cluster
	// (the mean interval between its scale-ups).
	SavingHorizon time.Duration
	// EvictionCost is what one pod's eviction costs, in USD, on top of its
	// restart (its share of its node's price for its own start-up time).
	EvictionCost float64
	// WorkloadCooldown: the pods of a workload (their controller, a
	// Deployment for a ReplicaSet's pods) are moved by consolidation at
	// most once within it.
	WorkloadCooldown time.Duration
	// AwaitScaleIn: while the requests fall, a command ready to act waits
	// for the ReplicaSets' scale-in to delete the pods it would evict
	// (consolidation.Phase.awaitScaleIn). Not a flag of its own: set with
	// --pod-deletion-cost-on-unneeded-nodes and scale-down on, which give
	// those pods their low deletion cost.
	AwaitScaleIn bool
}

// DisruptionBudget is a number of nodes, or a percentage of the nodes of
// the consolidatable node groups.
type DisruptionBudget struct {
	Count   int
	Percent int
	// IsPercent: Percent applies, not Count.
	IsPercent bool
}

// ParseDisruptionBudget reads "N" or "N%".
func ParseDisruptionBudget(s string) (DisruptionBudget, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 100 {
			return DisruptionBudget{}, fmt.Errorf("%q: a percentage must be a whole number from 0%% to 100%%", s)
		}
		return DisruptionBudget{Percent: n, IsPercent: true}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return DisruptionBudget{}, fmt.Errorf("%q: want a non-negative number of nodes (N) or a percentage (N%%)", s)
	}
	return DisruptionBudget{Count: n}, nil
}

// Nodes is the budget for a fleet of total nodes. A percentage rounds up,
// so that "10%" of a small fleet still allows one node, as Karpenter's
// budgets do; 0% and 0 allow none.
func (b DisruptionBudget) Nodes(total int) int {
	if !b.IsPercent {
		return b.Count
	}
	return (total*b.Percent + 99) / 100
}

func (b DisruptionBudget) String() string {
	if b.IsPercent {
		return strconv.Itoa(b.Percent) + "%"
	}
	return strconv.Itoa(b.Count)
}

// Window is a time window when consolidation may start commands: it opens
// at every time its cron schedule matches and stays open for Duration.
type Window struct {
	// Spec is the flag's value, for logs and status.
	Spec     string
	schedule cronSchedule
	Duration time.Duration
}

// maxWindowDuration bounds a window: longer ones are "always", which an
// empty --consolidation-windows says more plainly.
const maxWindowDuration = 7 * 24 * time.Hour

// ParseWindow reads "<minute> <hour> <day of month> <month> <day of
// week>=<duration>", e.g. "0 22 * * *=8h" (from 22:00 UTC for eight
// hours). '=' separates the schedule from the duration because '/' and ','
// belong to cron's own syntax (steps and lists).
func ParseWindow(s string) (Window, error) {
	spec, dur, ok := strings.Cut(s, "=")
	if !ok {
		return Window{}, fmt.Errorf("%q: want \"<cron schedule>=<duration>\", e.g. \"0 22 * * *=8h\"", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(dur))
	if err != nil || d <= 0 || d > maxWindowDuration {
		return Window{}, fmt.Errorf("%q: duration %q must be positive and at most %s", s, dur, maxWindowDuration)
	}
	cs, err := parseCron(spec)
	if err != nil {
		return Window{}, fmt.Errorf("%q: %v", s, err)
	}
	return Window{Spec: s, schedule: cs, Duration: d}, nil
}

// Open reports whether t (read in UTC) is inside the window: the schedule
// matched some minute in (t-Duration, t].
func (w Window) Open(t time.Time) bool {
	t = t.UTC().Truncate(time.Minute)
	for back := time.Duration(0); back < w.Duration; back += time.Minute {
		if w.schedule.matches(t.Add(-back)) {
			return true
		}
	}
	return false
}

// AnyOpen reports whether consolidation may start a command at t: no
// windows (always), or one of them open.
func AnyOpen(windows []Window, t time.Time) bool {
	if len(windows) == 0 {
		return true
	}
	for _, w := range windows {
		if w.Open(t) {
			return true
		}
	}
	return false
}

// cronSchedule is a parsed five-field cron schedule: a set of allowed
// values per field.
type cronSchedule struct {
	minute, hour, dom, month, dow [64]bool
	// domAny, dowAny: the field was "*". As in cron, when both day fields
	// are restricted a day matching either one matches.
	domAny, dowAny bool
}

func (c cronSchedule) matches(t time.Time) bool {
	if !c.minute[t.Minute()] || !c.hour[t.Hour()] || !c.month[int(t.Month())] {
		return false
	}
	dom, dow := c.dom[t.Day()], c.dow[int(t.Weekday())]
	switch {
	case c.domAny && c.dowAny:
		return true
	case c.domAny:
		return dow
	case c.dowAny:
		return dom
	}
	return dom || dow
}

var cronFields = []struct {
	name     string
	min, max int
}{{"minute", 0, 59}, {"hour", 0, 23}, {"day of month", 1, 31}, {"month", 1, 12}, {"day of week", 0, 7}}

// parseCron reads the five fields; each is "*" or a comma list of N, N-M,
// and either with "/step" ("*/15"). Day of week 7 is Sunday, as 0.
func parseCron(spec string) (cronSchedule, error) {
	fields := strings.Fields(spec)
	if len(fields) != len(cronFields) {
		return cronSchedule{}, fmt.Errorf("schedule %q: want 5 fields (minute hour day-of-month month day-of-week), got %d", spec, len(fields))
	}
	var c cronSchedule
	sets := []*[64]bool{&c.minute, &c.hour, &c.dom, &c.month, &c.dow}
	for i, f := range fields {
		if err := parseCronField(f, cronFields[i].min, cronFields[i].max, sets[i]); err != nil {
			return cronSchedule{}, fmt.Errorf("schedule %q: %s field %q: %v", spec, cronFields[i].name, f, err)
		}
	}
	c.domAny, c.dowAny = fields[2] == "*", fields[4] == "*"
	if c.dow[7] {
		c.dow[0] = true
	}
	return c, nil
}

func parseCronField(f string, lo, hi int, set *[64]bool) error {
	for _, part := range strings.Split(f, ",") {
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n <= 0 {
				return fmt.Errorf("step %q must be a positive number", stepStr)
			}
			step = n
		}
		from, to := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err1, err2 error
			from, err1 = strconv.Atoi(a)
			to, err2 = strconv.Atoi(b)
			if err1 != nil || err2 != nil || from > to {
				return fmt.Errorf("range %q must be N-M with N <= M", rng)
			}
		default:
			n, err := strconv.Atoi(rng)
			if err != nil {
				return fmt.Errorf("%q is not a number", rng)
			}
			from, to = n, n
			if hasStep {
				to = hi
			}
		}
		if from < lo || to > hi {
			return fmt.Errorf("values must be from %d to %d", lo, hi)
		}
		for v := from; v <= to; v += step {
			set[v] = true
		}
	}
	return nil
}
