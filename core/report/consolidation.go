package report

import (
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/core/consolidation"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// Event reasons of consolidation, recorded on the status ConfigMap and on
// each node the command removes; every message carries the saving per
// hour in USD.
const (
	EventConsolidationPlanned = "ConsolidationPlanned"
	EventConsolidated         = "Consolidated"
	EventConsolidationAborted = "ConsolidationAborted"
)

var _ consolidation.Recorder = (*Reporter)(nil)

// Consolidation records a consolidation outcome: the events, and
// consolidation_commands_total; a success adds its saving to
// consolidation_savings_per_hour.
func (r *Reporter) Consolidation(o consolidation.Outcome) {
	cmd := o.Command
	var typ, reason, msg string
	switch o.Result {
	case consolidation.Planned:
		typ, reason, msg = apiv1.EventTypeNormal, EventConsolidationPlanned, "Consolidation planned: "+cmd.String()
	case consolidation.Succeeded:
		typ, reason, msg = apiv1.EventTypeNormal, EventConsolidated, "Consolidated: "+cmd.String()
		metrics.AddConsolidationSavings(cmd.Saving)
	case consolidation.Aborted:
		typ, reason, msg = apiv1.EventTypeWarning, EventConsolidationAborted, "Consolidation aborted: "+cmd.String()+": "+o.Reason
	case consolidation.DrainStarted:
		for _, p := range o.Evicted {
			metrics.RegisterConsolidationEviction(consolidation.WorkloadKind(p))
		}
		return
	case consolidation.Unprofitable:
		metrics.RegisterConsolidationCommand(string(cmd.Kind), string(o.Result))
		return
	default:
		return
	}
	metrics.RegisterConsolidationCommand(string(cmd.Kind), string(o.Result))
	if r.events == nil {
		return
	}
	if r.status != nil {
		r.events.Event(r.status, typ, reason, msg)
	}
	for _, c := range cmd.Remove {
		r.events.Event(c.Node, typ, reason, msg)
	}
}

// ConsolidationPlanning counts the planner's work:
// consolidation_planner_simulated_removals_total and
// consolidation_planner_skipped_commands_total.
func (r *Reporter) ConsolidationPlanning(simulated, skipped int) {
	metrics.RegisterConsolidationPlanning(simulated, skipped)
}

// ConsolidationStatus sets the status ConfigMap's consolidation section
// (nil: consolidation is off).
func (r *Reporter) ConsolidationStatus(st *api.ConsolidationStatus) {
	if r.registry != nil {
		r.registry.SetConsolidation(st)
	}
}
