// Package reporttest gives tests of the executors a real reporter to
// report to. It is apart from scaledowntest so that packages core/report
// records for (core/consolidation) can use scaledowntest in their tests
// without an import cycle.
package reporttest

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// StatusRef is the status ConfigMap the tests' reporters record on.
var StatusRef = &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "status"}

// Outcomes is the reporter an actuator under test reports to: its events
// go to rec (on StatusRef for those about the autoscaler as a whole).
func Outcomes(rec record.EventRecorder, p cloudprovider.CloudProvider) scaledown.Outcomes {
	return report.New(report.Deps{Provider: p, Events: rec, Status: StatusRef})
}
