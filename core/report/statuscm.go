package report

import (
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/statuscm"
)

var _ statuscm.Recorder = (*Reporter)(nil)

// StatusWriteFailed records a failed write of the status ConfigMap: a
// Warning event on it (statuscm.Recorder).
func (r *Reporter) StatusWriteFailed(cm *apiv1.ConfigMap, err error) {
	r.events.Eventf(cm, apiv1.EventTypeWarning, "StatusWriteFailed", "Failed to update autoscaler status: %v", err)
}
