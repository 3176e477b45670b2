// Package waste is the least-waste expander: it prefers the option leaving
// the smallest fraction of the new nodes' cpu and memory unused once the
// pending pods (and the template's DaemonSet pods) are placed.
package waste

import (
	"math"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

type filter struct{}

// NewFilter returns the least-waste filter.
func NewFilter() expander.Filter { return filter{} }

// tolerance under which two scores count as a tie.
const tolerance = 1e-9

func (filter) BestOptions(options []expander.Option) []expander.Option {
	best := math.Inf(1)
	var out []expander.Option
	for _, o := range options {
		s, ok := Score(o)
		if !ok {
			continue
		}
		klog.V(5).InfoS("Least-waste expander: option scored", "nodeGroup", o.NodeGroup.Id(), "score", s, "nodes", o.NodeCount, "pods", len(o.Pods))
		switch {
		case s < best-tolerance:
			best = s
			out = []expander.Option{o}
		case math.Abs(s-best) <= tolerance:
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return options
	}
	return out
}

// Score is wasted cpu fraction plus wasted memory fraction (0 = no waste, 2 =
// all wasted); ok is false when the option has no template to measure.
func Score(o expander.Option) (float64, bool) {
	if o.NodeInfo == nil || o.NodeInfo.Node() == nil || o.NodeCount <= 0 {
		return 0, false
	}
	alloc := o.NodeInfo.Node().Status.Allocatable
	if len(alloc) == 0 {
		alloc = o.NodeInfo.Node().Status.Capacity
	}
	availCPU := float64(alloc.Cpu().MilliValue()) * float64(o.NodeCount)
	availMem := float64(alloc.Memory().Value()) * float64(o.NodeCount)
	if availCPU <= 0 || availMem <= 0 {
		return 0, false
	}
	var usedCPU, usedMem float64
	for _, p := range o.NodeInfo.Pods() {
		req := framework.PodRequests(p)
		usedCPU += float64(req.Cpu().MilliValue()) * float64(o.NodeCount)
		usedMem += float64(req.Memory().Value()) * float64(o.NodeCount)
	}
	for _, p := range o.Pods {
		req := framework.PodRequests(p)
		usedCPU += float64(req.Cpu().MilliValue())
		usedMem += float64(req.Memory().Value())
	}
	wasteCPU := math.Max(0, (availCPU-usedCPU)/availCPU)
	wasteMem := math.Max(0, (availMem-usedMem)/availMem)
	return wasteCPU + wasteMem, true
}
