package consolidation

import (
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// podRestart is how long an evicted pod is taken to be away: its
// replacement's scheduling, image pull and start. Pod start-up times are
// not in the informer cache (bound pods' conditions are trimmed for
// memory), so one figure serves all pods.
const podRestart = 30 * time.Second

// replacementOverlap is how long a replacement is billed beside the nodes
// it replaces: a droplet's boot and registration, then the drain
// (DigitalOcean bills per second, with a 60-second minimum).
const replacementOverlap = 5 * time.Minute

// CostModel weighs a command's saving against what its disruption costs
// (docs/consolidation.md): a command pays when its hourly saving over the
// horizon exceeds the cost of the pods it evicts and of the replacement's
// overlap with the nodes it replaces. The zero model counts no cost and a
// one-hour horizon.
type CostModel struct {
	// Horizon is how long the saving is expected to last.
	Horizon time.Duration
	// EvictionCost is what one eviction costs, in USD, on top of the
	// pod's restart.
	EvictionCost float64
	// Demand is the cluster now; Growth how fast its requests grew lately
	// (per hour, Trend). While they grow, a saving lasts only until they
	// need the room the command leaves.
	Demand Demand
	Growth Resources
}

// Appraisal is a command's weighing.
type Appraisal struct {
	// Gain is the saving over the horizon, Cost the disruption's, both in
	// USD; Value is Gain - Cost.
	Gain, Cost, Value float64
	// Disruption is the part of Cost the evictions make.
	Disruption float64
	Horizon    time.Duration
	// Growing: the horizon is how long the room left lasts while the
	// cluster's requests grow, shorter than the learnt one.
	Growing bool
	// Evictions counts the pods the command moves.
	Evictions int
}

// Pays reports whether the command is worth its disruption.
func (a Appraisal) Pays() bool { return a.Value > 0 }

// String shows the rule, for the command's events and the status.
func (a Appraisal) String() string {
	verb := ">"
	if !a.Pays() {
		verb = "<="
	}
	// Minutes suffice for the default horizon; a shorter one (a flag, a
	// compressed test day) shows its seconds rather than "0s".
	unit := time.Minute
	if a.Horizon < 10*time.Minute {
		unit = time.Second
	}
	over := a.Horizon.Round(unit).String()
	if a.Growing {
		over += " (until the growing requests need the room)"
	}
	return fmt.Sprintf("$%.4f over %s %s $%.4f for %d eviction(s)", a.Gain, over, verb, a.Cost, a.Evictions)
}

// Appraise weighs cmd: each moved pod costs EvictionCost plus its share of
// its node's price (the larger of its cpu and memory request shares of the
// node's allocatable) over podRestart; a Replace also costs the
// replacement's price over replacementOverlap. The saving lasts the
// horizon, or less while the requests grow (lasts).
func (m CostModel) Appraise(cmd *Command) Appraisal {
	horizon := m.Horizon
	if horizon <= 0 {
		horizon = time.Hour
	}
	growing := false
	if m.Growth != (Resources{}) {
		if l := lasts(m.Demand, m.Growth, cmd, horizon); l < horizon {
			horizon, growing = l, true
		}
	}
	a := Appraisal{Horizon: horizon, Growing: growing, Gain: cmd.Saving * horizon.Hours()}
	for _, c := range cmd.Remove {
		for _, p := range c.Moving {
			a.Evictions++
			a.Disruption += m.EvictionCost + c.Price*share(p, c.Node)*podRestart.Hours()
		}
	}
	a.Cost = a.Disruption
	if cmd.Kind == Replace && cmd.Replacement != nil {
		a.Cost += cmd.Replacement.Price * float64(cmd.Count) * replacementOverlap.Hours()
	}
	a.Value = a.Gain - a.Cost
	return a
}

// share is the larger of p's cpu and memory request shares of node's
// allocatable, at most 1.
func share(p *apiv1.Pod, node *apiv1.Node) float64 {
	req := utilization.RequestsOf(p, "")
	best := 0.0
	for _, r := range []struct {
		used int64
		name apiv1.ResourceName
	}{{req.MilliCPU, apiv1.ResourceCPU}, {req.MilliMemory, apiv1.ResourceMemory}} {
		alloc := node.Status.Allocatable[r.name]
		if alloc.IsZero() {
			continue
		}
		if s := float64(r.used) / float64(alloc.MilliValue()); s > best {
			best = s
		}
	}
	return min(best, 1)
}

// Lifetimes learns how long a saving lasts in this cluster: capacity
// removed is bought again at the next scale-up, so the mean interval
// between the last scale-ups (or the quiet time since the last one, when
// longer) is how long a saving is expected to last. It keeps the last
// lifetimeSamples scale-up times.
type Lifetimes struct {
	ups []time.Time
}

const lifetimeSamples = 8

// ScaledUp records a scale-up at t.
func (l *Lifetimes) ScaledUp(t time.Time) {
	if n := len(l.ups); n > 0 && !t.After(l.ups[n-1]) {
		return
	}
	l.ups = append(l.ups, t)
	if len(l.ups) > lifetimeSamples {
		l.ups = l.ups[len(l.ups)-lifetimeSamples:]
	}
}

// Horizon is the expected lifetime of a saving made at now, at most
// limit: limit until two scale-ups were seen.
func (l *Lifetimes) Horizon(now time.Time, limit time.Duration) time.Duration {
	n := len(l.ups)
	if n < 2 {
		return limit
	}
	mean := l.ups[n-1].Sub(l.ups[0]) / time.Duration(n-1)
	return min(max(mean, now.Sub(l.ups[n-1])), limit)
}
