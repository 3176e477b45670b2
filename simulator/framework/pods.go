package framework

import (
	"fmt"
	"strings"

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

// PodNames lists pods as namespace/name, ", " between them, for logs and
// events: the first limit of them and how many more (all of them when limit
// is 0 or less), or "none" when there are no pods.
func PodNames(pods []*apiv1.Pod, limit int) string {
	if len(pods) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, p := range pods {
		if limit > 0 && i == limit {
			fmt.Fprintf(&b, " and %d more", len(pods)-limit)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Namespace + "/" + p.Name)
	}
	return b.String()
}
