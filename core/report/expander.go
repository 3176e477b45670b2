package report

import (
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/expander/priority"
)

var _ priority.Recorder = (*Reporter)(nil)

// PriorityConfigMapInvalid records a priorities ConfigMap the priority
// expander ignores: a Warning event on it (priority.Recorder).
func (r *Reporter) PriorityConfigMapInvalid(cm *apiv1.ConfigMap, err error) {
	r.events.Eventf(cm, apiv1.EventTypeWarning, "PriorityConfigMapInvalid", "priority expander ignores this ConfigMap: %v", err)
}
