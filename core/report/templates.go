package report

import (
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// Templates records what building the iteration's templates found: the
// devices DRA templates and ready nodes disagree on
// (dra_node_template_resources_mismatch), over every node group.
func (r *Reporter) Templates(t scaleup.Templates) {
	metrics.UpdateDRATemplateMismatches(t.DRAMismatches)
}
