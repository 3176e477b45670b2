// Package budgets bounds how many node removals may start in one loop:
// --max-scale-down-parallelism for all removals and --max-drain-parallelism
// for those that drain their node, both counting the removals already in
// flight, as upstream's scale-down budgets do.
package budgets

// Budgets is how many removals may start now.
type Budgets struct {
	// Total is how many removals may start, Drains how many of them may
	// drain a node (never more than Total).
	Total, Drains int
	// MaxTotal and MaxDrains are the flags' values, for the log.
	MaxTotal, MaxDrains int
}

// New returns the budgets left by the removals in flight.
func New(maxParallelism, maxDrainParallelism, inFlight, draining int) Budgets {
	total := max(0, maxParallelism-inFlight)
	return Budgets{
		Total:    total,
		Drains:   max(0, min(maxDrainParallelism-draining, total)),
		MaxTotal: maxParallelism, MaxDrains: maxDrainParallelism,
	}
}

// What a removal waits for.
const (
	WaitParallelism      = "max-scale-down-parallelism"
	WaitDrainParallelism = "max-drain-parallelism"
)

// Wait says why one more removal (a drain when drain is true) cannot start
// after picked removals, drains of them, were picked this loop ("" when it
// can).
func (b Budgets) Wait(drain bool, picked, drains int) string {
	switch {
	case picked >= b.Total:
		return WaitParallelism
	case drain && drains >= b.Drains:
		return WaitDrainParallelism
	}
	return ""
}
