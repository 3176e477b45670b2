package cloudprovider

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequests returns what a pod asks the scheduler for: the sum of its
// containers' requests, raised to any single init container's request when
// that is larger (init containers run one at a time, before the others),
// plus the pod overhead. Pricing models use it to price a pod.
func PodRequests(pod *apiv1.Pod) apiv1.ResourceList {
	out := apiv1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addResources(out, c.Resources.Requests)
	}
	// Restartable init containers (sidecars) keep running next to the app.
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == apiv1.ContainerRestartPolicyAlways {
			addResources(out, c.Resources.Requests)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == apiv1.ContainerRestartPolicyAlways {
			continue
		}
		for name, q := range c.Resources.Requests {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	addResources(out, pod.Spec.Overhead)
	return out
}

func addResources(dst, src apiv1.ResourceList) {
	for name, q := range src {
		cur, ok := dst[name]
		if !ok {
			cur = *resource.NewQuantity(0, q.Format)
		}
		cur.Add(q)
		dst[name] = cur
	}
}
