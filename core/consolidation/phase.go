package consolidation

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// abortBackoff is how long an aborted command is not tried again, so a
// replacement that never becomes usable is not bought again and again.
const abortBackoff = time.Hour

// Status is where consolidation stands, as the status ConfigMap shows it.
type Status string

const (
	Idle          Status = "Idle"
	OutsideWindow Status = "OutsideWindow"
	Waiting       Status = "Waiting"
	PlannedStatus Status = "Planned"
)

// Recorder is what the phase reports through (core/report implements it):
// each command's outcomes, and the status section once per iteration.
type Recorder interface {
	Consolidation(Outcome)
	ConsolidationStatus(*api.ConsolidationStatus)
	// ConsolidationPlanning records one loop's planning work: the node
	// removals simulated and the commands the work budget left unweighed.
	ConsolidationPlanning(simulated, skipped int)
}

// Phase is consolidation's part of the loop: it moves the command in
// flight on, or, when none is, plans one and starts it once it has held
// for the stabilization window, inside the windows, when nothing makes it
// wait (docs/consolidation.md). It keeps what lasts across iterations:
// the command in flight and the one held, the workloads moved, the
// commands aborted, the rhythm of scale-ups, and the status section.
type Phase struct {
	opts config.ConsolidationOptions
	exec *Executor
	stab *Stabilizer
	rec  Recorder

	moved     *Ledger
	lifetimes Lifetimes
	trend     Trend
	// requests: every pod's requests, cached per object for the trend.
	requests *utilization.RequestsCache
	// aborted: when each command (by Key) last aborted.
	aborted map[string]time.Time
	// unprofitable: the keys of the commands refused last iteration for
	// not paying, so each refusal is counted once while it lasts.
	unprofitable map[string]bool

	status   Status
	statusAt time.Time
	// planned is the command held for the stabilization window or for the
	// scale-in (awaitScaleIn); awaiting the key of the one held for the
	// scale-in, logged once.
	planned    *Command
	awaiting   string
	lastResult string
	// savings: the hourly saving of the commands that succeeded.
	savings float64
	// settled: the last plan found no command, on the state named by key
	// (Loop.State and the phase's own), at the time at.
	settled settled
}

// settled is a plan that found nothing, and what it was made on.
type settled struct {
	key settledKey
	at  time.Time
}

// settledKey is what a plan reads: the loop's state (Loop.State) and the
// phase's own, the workloads in the ledger and the commands backed off,
// whose expiries change what may be planned.
type settledKey struct {
	loop           uint64
	moved, aborted int
}

// NewPhase returns the phase; exec carries its commands out.
func NewPhase(opts config.ConsolidationOptions, exec *Executor, rec Recorder) *Phase {
	return &Phase{opts: opts, exec: exec, stab: NewStabilizer(opts.StabilizationWindow), rec: rec,
		moved: NewLedger(opts.WorkloadCooldown), aborted: map[string]time.Time{}, requests: utilization.NewRequestsCache()}
}

// Loop is what the phase needs of one iteration.
type Loop struct {
	View View
	// Wait says why no command may be planned now ("" if one may): nodes
	// still coming, or scale-down's drains (View.Busy).
	Wait string
	// LastScaleUp is the loop's last scale-up (zero: none).
	LastScaleUp time.Time
	// Demand returns the cluster's requests and live allocatable this
	// loop (nil: none known). It is read when the trend takes a sample
	// and when a plan is made: at 5,000 nodes reading every pod's
	// requests and every node's allocatable was 2 ms of a loop whose
	// plan is reused.
	Demand func() Demand
	// Candidates returns the candidates' input, built from the cluster
	// (groups, prices); false when nothing can be planned (no prices).
	// Input returns the planner's input (replacements, limits); it is built
	// only when some node is a candidate: a cluster of many pools none of
	// which consolidates pays for no templates. The phase adds its own: the
	// workloads moved, the backoffs, the cost model, the budget.
	Candidates func() (CandidateInput, bool)
	Input      func() Input
	// State names everything the caller gives the plan (the snapshot's
	// content, groups and their sizes, the nodes held or being removed,
	// limits); 0: unknown. A plan that found no command on a state is not
	// made again on the same state within the stabilization window (see
	// Phase.unchanged).
	State uint64
}

func (l Loop) demand() Demand {
	if l.Demand == nil {
		return Demand{}
	}
	return l.Demand()
}

// Run is the phase's iteration; it reports whether it started a command.
func (ph *Phase) Run(ctx context.Context, l Loop) (started bool) {
	now := l.View.Now
	ph.planned = nil
	ph.prune(now)
	if ph.trend.Due(now, ph.trendWindow()) {
		ph.trend.Observe(now, l.demand().Requested, ph.trendWindow())
	}
	defer ph.publish()
	ph.record(ph.exec.Step(ctx, l.View), now)
	if cmd, phase, since := ph.exec.InFlight(); cmd != nil {
		ph.settled = settled{}
		ph.set(Status(phase), since)
		return false
	}
	if !config.AnyOpen(ph.opts.Windows, now) {
		ph.settled = settled{}
		ph.stab.Reset()
		ph.set(OutsideWindow, now)
		return false
	}
	if why := ph.wait(l); why != "" {
		klog.V(2).InfoS("Consolidation: waiting", "why", why)
		ph.settled = settled{}
		ph.stab.Reset()
		ph.set(Waiting, now)
		return false
	}
	key := settledKey{loop: l.State, moved: ph.moved.Len(), aborted: len(ph.aborted)}
	if ph.unchanged(key, now) {
		klog.V(4).InfoS("Consolidation: nothing changed since the last plan found no command", "at", ph.settled.at)
		ph.set(Idle, now)
		return false
	}
	cmd := ph.plan(l)
	isNew, ready := ph.stab.Observe(cmd, now)
	ph.settled = settled{}
	if cmd == nil {
		if l.State != 0 {
			ph.settled = settled{key: key, at: now}
		}
		ph.set(Idle, now)
		return false
	}
	if isNew {
		klog.InfoS("Consolidation: planned", "command", cmd.String(), "actsAfter", ph.stab.Window(cmd))
		ph.record([]Outcome{{Command: *cmd, Result: Planned}}, now)
	}
	if !ready {
		ph.planned = cmd
		ph.set(PlannedStatus, ph.stab.Since())
		return false
	}
	if why := ph.awaitScaleIn(cmd, ph.stab.Since().Add(ph.stab.Window(cmd)), now); why != "" {
		if k := cmd.Key(); k != ph.awaiting {
			ph.awaiting = k
			klog.V(2).InfoS("Consolidation: waiting for the scale-in", "command", cmd.String(), "why", why)
		}
		ph.planned = cmd
		ph.set(PlannedStatus, ph.stab.Since())
		return false
	}
	ph.awaiting = ""
	// The plan ran on this iteration's cluster: the command is validated
	// just before it acts.
	ph.stab.Reset()
	ph.record(ph.exec.Start(ctx, *cmd, l.View), now)
	if cur, phase, since := ph.exec.InFlight(); cur != nil {
		ph.set(Status(phase), since)
	} else {
		ph.set(Idle, now) // aborted at once (lastResult says why)
	}
	return true
}

// Disrupted records pods another phase evicts (scale-down's drains): a
// workload whose pod scale-down just moved is as disrupted as one
// consolidation moved, and its cooldown counts from now. Pods a drain
// does not move (DaemonSet and mirror pods) are left out.
func (ph *Phase) Disrupted(pods []*apiv1.Pod, now time.Time) {
	ph.moved.Record(slices.DeleteFunc(slices.Clone(pods), func(p *apiv1.Pod) bool { return !isMovable(p) }), now)
}

// Requested is what pods request (scheduled or pending, finished ones left
// out), read for the trend of the cluster's requests and for a plan: each pod
// is read once while its object stays the same.
func (ph *Phase) Requested(pods []*apiv1.Pod) Resources { return Requested(pods, ph.requests) }

// Idle is the phase's iteration when no node can be a candidate (no node
// group consolidates) and no command is in flight: nothing is planned,
// and the caller builds nothing for it (a snapshot, the pods' requests).
func (ph *Phase) Idle(now time.Time, why string) {
	klog.V(4).InfoS("Consolidation: idle", "why", why)
	ph.planned = nil
	ph.settled = settled{}
	ph.prune(now)
	ph.stab.Reset()
	ph.set(Idle, now)
	ph.publish()
}

// unchanged tells that the last plan found no command on the state key
// names, less than a stabilization window ago: planning again would find
// none. At 5,000 candidate nodes a plan was most of consolidation's cost
// in a steady loop (issue 44). What no state shows (the cost model's
// horizon growing with the time since the last scale-up, the requests'
// trend, a size available again) is weighed again once the window has
// passed, as Karpenter's cluster state revalidates every five minutes
// whatever it saw (kubernetes-sigs/karpenter,
// pkg/controllers/state/cluster.go, ConsolidationState). Only a plan
// that found nothing is kept: a command is always planned afresh.
func (ph *Phase) unchanged(key settledKey, now time.Time) bool {
	return key.loop != 0 && !ph.settled.at.IsZero() && ph.settled.key == key && now.Sub(ph.settled.at) < ph.opts.StabilizationWindow
}

// wait says why no command may be planned now ("" if one may): no
// flapping against scale-up, nor against nodes coming or drains.
func (ph *Phase) wait(l Loop) string {
	now, window := l.View.Now, ph.opts.StabilizationWindow
	switch {
	case l.View.Busy != "":
		return l.View.Busy
	case !l.LastScaleUp.IsZero() && now.Sub(l.LastScaleUp) < window:
		return fmt.Sprintf("last scale-up %s ago (--consolidation-stabilization-window=%s)", now.Sub(l.LastScaleUp).Round(time.Second), window)
	}
	return l.Wait
}

// plan completes the loop's planner input with what the phase keeps and
// decides.
func (ph *Phase) plan(l Loop) *Command {
	ci, ok := l.Candidates()
	if !ok {
		return nil
	}
	now := l.View.Now
	ci.Moved = func(p *apiv1.Pod) bool { return ph.moved.Recent(p, now) }
	ci.Limit = maxCandidates
	cands, skipped, total := Candidates(ci)
	for _, s := range skipped {
		klog.V(4).InfoS("Consolidation: not a candidate", "node", s.Node, "why", s.Why)
	}
	if len(cands) == 0 {
		return nil
	}
	in := l.Input()
	in.Candidates = cands
	in.MaxNodes = ph.opts.MaxDisrupted.Nodes(total + len(skipped))
	in.Threshold = ph.opts.SavingsThreshold
	demand := l.demand()
	ph.trend.Observe(now, demand.Requested, ph.trendWindow()) // the newest reading stands for its slot
	in.Cost = CostModel{Horizon: ph.lifetimes.Horizon(now, ph.opts.SavingHorizon), EvictionCost: ph.opts.EvictionCost,
		Demand: demand, Growth: ph.trend.Growth(ph.trendWindow())}
	in.BackedOff = func(key string) bool { at, ok := ph.aborted[key]; return ok && now.Sub(at) < abortBackoff }
	in.Held = ph.stab.Key()
	d := Decide(in)
	ph.rec.ConsolidationPlanning(d.Simulated, d.Skipped)
	ph.refused(d.Unprofitable)
	return d.Command
}

// trendWindow is how far back the requests' growth is read: the longest
// a saving is counted on (--consolidation-saving-horizon).
func (ph *Phase) trendWindow() time.Duration {
	if ph.opts.SavingHorizon > 0 {
		return ph.opts.SavingHorizon
	}
	return time.Hour
}

// ScaledUp records a scale-up: a sample of how long savings last.
func (ph *Phase) ScaledUp(now time.Time) { ph.lifetimes.ScaledUp(now) }

// Held returns the nodes the command in flight holds (Executor.Held).
func (ph *Phase) Held(nodes []*apiv1.Node, groupOf func(string) string) []string {
	return ph.exec.Held(nodes, groupOf)
}

// InFlight returns the command in flight and its phase (Executor.InFlight).
func (ph *Phase) InFlight() (*Command, Stage, time.Time) { return ph.exec.InFlight() }

// LastResult is how the last command ended, as the status shows it.
func (ph *Phase) LastResult() string { return ph.lastResult }

// record hands outcomes to the recorder and keeps the last result, the
// savings, the workloads moved and the commands aborted.
func (ph *Phase) record(outcomes []Outcome, now time.Time) {
	for _, o := range outcomes {
		ph.rec.Consolidation(o)
		switch o.Result {
		case DrainStarted:
			ph.moved.Record(o.Evicted, now)
		case Succeeded:
			ph.savings += o.Command.Saving
			ph.lastResult = "succeeded: " + o.Command.String()
		case Aborted:
			ph.aborted[o.Command.Key()] = now
			ph.lastResult = "aborted: " + o.Command.String() + ": " + o.Reason
		}
	}
}

// refused reports the commands refused because they do not pay, each once
// while it is refused iteration after iteration.
func (ph *Phase) refused(cmds []Command) {
	seen := make(map[string]bool, len(cmds))
	for _, c := range cmds {
		k := c.Key()
		seen[k] = true
		if !ph.unprofitable[k] {
			klog.V(2).InfoS("Consolidation: refused, the saving does not pay for the disruption", "command", c.String())
			ph.rec.Consolidation(Outcome{Command: c, Result: Unprofitable})
		}
	}
	ph.unprofitable = seen
}

// prune forgets what is older than its window: the ledger's workloads and
// the aborted commands past their backoff.
func (ph *Phase) prune(now time.Time) {
	ph.moved.Prune(now)
	for k, at := range ph.aborted {
		if now.Sub(at) >= abortBackoff {
			delete(ph.aborted, k)
		}
	}
}

// set records the status shown, and since when (kept while it lasts).
func (ph *Phase) set(status Status, since time.Time) {
	if status != ph.status {
		ph.status, ph.statusAt = status, since
	}
}

// publish writes the status section.
func (ph *Phase) publish() {
	st := &api.ConsolidationStatus{Status: string(ph.status), LastResult: ph.lastResult, SavingsPerHour: fmt.Sprintf("%.4f", ph.savings)}
	if !ph.statusAt.IsZero() {
		st.Since = api.FormatTime(ph.statusAt)
	}
	if cmd, _, _ := ph.exec.InFlight(); cmd != nil {
		st.Command = cmd.String()
	} else if ph.planned != nil {
		st.Command = ph.planned.String()
	}
	ph.rec.ConsolidationStatus(st)
}
