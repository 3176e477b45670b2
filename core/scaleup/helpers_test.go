package scaleup

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

func resourceBytes(b int64) *resource.Quantity { return resource.NewQuantity(b, resource.BinarySI) }
func resourceMilli(m int64) *resource.Quantity {
	return resource.NewMilliQuantity(m, resource.DecimalSI)
}
func frameworkInfo(n *apiv1.Node) *framework.NodeInfo { return framework.NewNodeInfo(n) }

// countingRecorder counts what it is asked to record: the tests here check
// decisions and calls; core/report's tests check the records.
type countingRecorder struct{ scaleUps, minSizes, provisioned int }

func (r *countingRecorder) ScaleUp(*Plan, *Outcome) { r.scaleUps++ }

func (r *countingRecorder) ScaleUpToMinSize([]MinSizeSkip, []Call, time.Time) { r.minSizes++ }

func (r *countingRecorder) Provisioned([]Call, time.Time) { r.provisioned++ }
