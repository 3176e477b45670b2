package main

import (
	"runtime/debug"
	"strconv"
)

// defaultGCPercent is the collector's target when GOGC is not set: the heap
// may grow by half its live size between collections, not by all of it as
// Go's default of 100 lets it. Most of this autoscaler's heap is what it
// must keep (the informers' objects, the cluster snapshot), and a loop's
// garbage is small beside it, so collecting twice as often keeps a sixth
// to a quarter less of the memory the kubelet counts, for CPU within the
// runs' spread at 1,000 nodes and about 50 ms a loop at 5,000
// (docs/benchmarks.md, "GOGC 50"). Prometheus 2.53 made the same change of
// its default. GOGC in the environment wins, as always.
const defaultGCPercent = 50

// gcPercent is the collector's target in force and where it came from, for
// the start-up log line.
type gcPercent struct {
	value  string // GOGC's value, or the default's
	source string // "GOGC" or "default"
}

// setGCPercent sets the collector's target to defaultGCPercent unless the
// environment (getenv) sets GOGC, which the runtime has applied already.
func setGCPercent(getenv func(string) string) gcPercent {
	if v := getenv("GOGC"); v != "" {
		return gcPercent{value: v, source: "GOGC"}
	}
	debug.SetGCPercent(defaultGCPercent)
	return gcPercent{value: strconv.Itoa(defaultGCPercent), source: "default"}
}
