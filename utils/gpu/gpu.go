// Package gpu names the extended resources GPU device plugins advertise,
// one list for the core (readiness, scale-up's GPU options) and the
// providers alike. Which vendors a cloud offers stays with its provider.
package gpu

import apiv1 "k8s.io/api/core/v1"

// The device plugins' resources, as upstream names them
// (cluster-autoscaler/utils/gpu).
const (
	ResourceNvidiaGPU apiv1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU    apiv1.ResourceName = "amd.com/gpu"
	// ResourceDirectX is what Windows nodes advertise for a GPU. DOKS runs
	// no Windows nodes; it stays in the list because the list is
	// Kubernetes' (upstream's has it), and a resource no node offers costs
	// nothing to look for.
	ResourceDirectX apiv1.ResourceName = "microsoft.com/directx"
)

// Resources are the GPU resources, in the order they are looked for.
var Resources = []apiv1.ResourceName{ResourceNvidiaGPU, ResourceAMDGPU, ResourceDirectX}

// In returns the first GPU resource l holds a non-zero quantity of, and
// whether there is one: a node's allocatable or capacity, a pod's requests.
func In(l apiv1.ResourceList) (apiv1.ResourceName, bool) {
	for _, r := range Resources {
		if q, ok := l[r]; ok && !q.IsZero() {
			return r, true
		}
	}
	return "", false
}
