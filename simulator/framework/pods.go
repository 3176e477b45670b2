package framework

import (
	apiv1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests returns what the scheduler reserves for a pod: its containers
// and restartable init containers (sidecars), or the peak of an init
// container plus the sidecars started before it when that is larger, plus
// the pod overhead. It is the scheduler's own helper, so pricing, the
// expanders, binpacking and utilization all count a pod as placement does.
func PodRequests(pod *apiv1.Pod) apiv1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}
