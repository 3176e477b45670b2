package metrics

import "github.com/prometheus/client_golang/prometheus"

// Consolidation metrics: this project's own (upstream has no
// consolidation; docs/consolidation.md).
var (
	consolidationCommands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "consolidation_commands_total",
		Help: "Consolidation commands by kind (delete, replace) and result (planned, succeeded, aborted, unprofitable: refused because its saving over the horizon does not pay for its disruption).",
	}, []string{"kind", "result"})
	// A gauge, not a counter: its value is a rate in USD per hour (what
	// the cluster costs less per hour thanks to the commands that
	// succeeded since this process started), not a count of events, and
	// rate() over it means nothing. It only rises within a process and
	// starts at 0 in a new one.
	consolidationSavings = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "consolidation_savings_per_hour",
		Help: "Hourly saving in USD (node prices from the DigitalOcean Sizes API) of the consolidation commands that succeeded since the process started.",
	})
)

// Values of consolidation_commands_total's labels.
var (
	consolidationKinds   = []string{"delete", "replace"}
	consolidationResults = []string{"planned", "succeeded", "aborted", "unprofitable"}
)

var consolidationEvictions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: caNamespace, Name: "consolidation_evictions_total",
	Help: "Pods consolidation evicted, by the kind of their workload (Deployment, StatefulSet, Job, ...; \"\" for none).",
}, []string{"owner_kind"})

// The planner's work, bounded per loop (docs/consolidation.md, "Work per
// loop").
var (
	consolidationSimulated = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "consolidation_planner_simulated_removals_total",
		Help: "Node removals consolidation's planner simulated to weigh commands.",
	})
	consolidationSkipped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "consolidation_planner_skipped_commands_total",
		Help: "Commands consolidation's planner left unweighed because its work budget for the loop was spent.",
	})
)

func consolidationCollectors() []prometheus.Collector {
	return []prometheus.Collector{consolidationCommands, consolidationSavings, consolidationEvictions, consolidationSimulated, consolidationSkipped}
}

// RegisterConsolidationPlanning counts one loop's planning work.
func RegisterConsolidationPlanning(simulated, skipped int) {
	consolidationSimulated.Add(float64(simulated))
	consolidationSkipped.Add(float64(skipped))
}

// RegisterConsolidationEviction counts a pod consolidation evicts.
func RegisterConsolidationEviction(ownerKind string) {
	consolidationEvictions.WithLabelValues(ownerKind).Inc()
}

// preCreateConsolidation exports every series at 0, so rate() and alerts
// work before the first command.
func preCreateConsolidation() {
	for _, k := range consolidationKinds {
		for _, r := range consolidationResults {
			consolidationCommands.WithLabelValues(k, r).Add(0)
		}
	}
}

// RegisterConsolidationCommand counts a command of kind that reached result.
func RegisterConsolidationCommand(kind, result string) {
	consolidationCommands.WithLabelValues(kind, result).Inc()
}

// AddConsolidationSavings adds a succeeded command's hourly saving.
func AddConsolidationSavings(usdPerHour float64) {
	consolidationSavings.Add(usdPerHour)
}

// Money metrics: this project's own (docs/limits.md). Gauges of a rate in
// USD an hour.
var (
	hourlyCostTotal = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "hourly_cost_total",
		Help: "What the autoscaled node groups' nodes cost an hour in USD: each group's target size times its size's price (Sizes API, or the cloud config's price_overrides).",
	})
	hourlyCostNodeGroup = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "hourly_cost_node_group",
		Help: "What a node group's nodes cost an hour in USD: its target size times its size's price.",
	}, []string{"node_group"})
	hourlyCostLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "hourly_cost_limit",
		Help: "--max-hourly-cost in USD an hour; 0 when there is none.",
	})
)

func moneyCollectors() []prometheus.Collector {
	return []prometheus.Collector{hourlyCostTotal, hourlyCostNodeGroup, hourlyCostLimit}
}

// UpdateHourlyCost sets the total, the limit and each group's cost;
// groups absent from perGroup lose their series.
func UpdateHourlyCost(total, limit float64, perGroup map[string]float64) {
	hourlyCostTotal.Set(total)
	hourlyCostLimit.Set(limit)
	hourlyCostNodeGroup.Reset()
	for id, v := range perGroup {
		hourlyCostNodeGroup.WithLabelValues(id).Set(v)
	}
}
