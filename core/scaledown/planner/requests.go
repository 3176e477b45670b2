package planner

import (
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// podUtilization is the node's utilization.Calculate answer without a GPU
// resource, with the pods' requests from c.
func podUtilization(c *utilization.RequestsCache, n *apiv1.Node, pods []*apiv1.Pod, skipDaemonSets bool) (utilization.Info, error) {
	return utilization.CalculateWith(n, pods, skipDaemonSets, "", c.Get)
}
