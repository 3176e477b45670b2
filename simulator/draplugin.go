package simulator

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	schedruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// withCheapDRASkip replaces the DynamicResources factory of reg by one
// whose plugin skips, at once, pods that can need no device: no
// ResourceClaims and no extended resource a DeviceClass could back. The
// scheduler's own PreFilter finds the same thing only after computing the
// pod's full requests (resourcehelper.PodRequests, for the
// DRAExtendedResource feature) and allocating its state; in a removal
// simulation that ran for every moved pod, a quarter of the bytes a
// scale-down loop allocates. Pods that may need a device go to the
// scheduler's plugin unchanged.
func withCheapDRASkip(reg schedruntime.Registry) {
	orig := reg[names.DynamicResources]
	reg[names.DynamicResources] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := orig(ctx, args, h)
		if err != nil {
			return nil, err
		}
		dr, ok := p.(*dynamicresources.DynamicResources)
		if !ok {
			return p, nil
		}
		return &cheapDRASkip{dr}, nil
	}
}

// cheapDRASkip is the scheduler's DynamicResources plugin (every extension
// point its own) with a PreFilter that skips pods needing no device. A
// skipped PreFilter makes the framework skip the plugin's Filter for that
// pod, as the scheduler's own Skip does; Reserve runs only for pods with
// claims (see reserveClaims), which always reach the real PreFilter.
type cheapDRASkip struct {
	*dynamicresources.DynamicResources
}

func (p *cheapDRASkip) PreFilter(ctx context.Context, state fwk.CycleState, pod *apiv1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !mayNeedDevices(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return p.DynamicResources.PreFilter(ctx, state, pod, nodes)
}

// mayNeedDevices reports whether the pod has ResourceClaims, or requests or
// limits (in any container, the pod-level resources or the overhead) a
// resource named as the DRAExtendedResource feature maps to a DeviceClass:
// an extended resource (vendor.example/name) or
// deviceclass.resource.kubernetes.io/*.
func mayNeedDevices(pod *apiv1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	extended := func(l apiv1.ResourceList) bool {
		for name := range l {
			if schedutil.IsDRAExtendedResourceName(name) {
				return true
			}
		}
		return false
	}
	for _, cs := range [][]apiv1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if extended(cs[i].Resources.Requests) || extended(cs[i].Resources.Limits) {
				return true
			}
		}
	}
	if r := pod.Spec.Resources; r != nil && (extended(r.Requests) || extended(r.Limits)) {
		return true
	}
	return extended(pod.Spec.Overhead)
}
