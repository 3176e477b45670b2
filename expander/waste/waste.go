// Package waste is the least-waste expander: it prefers the option leaving
// the smallest fraction of the new nodes' cpu and memory capacity unused by
// the pending pods it places, as upstream's does.
//
// Capacity, not allocatable: DigitalOcean prices a droplet by its size, and
// DOKS reserves about the same slice of every node, so a larger droplet has
// more allocatable per dollar. Measured against allocatable, two
// s-8vcpu-16gb would waste more than four s-4vcpu-8gb for the same pods at
// the same price, because they hold more; measured against capacity (what
// is paid for) the two tie, as their price does.
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

// BestOptions keeps the options of least waste; among those, the ones
// adding the fewest nodes (not upstream's: its tie goes to the next
// expander, random by default). Of the same capacity, fewer larger nodes
// give more allocatable for the same price and are fewer to drain later.
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
	fewest := out[0].NodeCount
	for _, o := range out {
		fewest = min(fewest, o.NodeCount)
	}
	kept := out[:0]
	for _, o := range out {
		if o.NodeCount == fewest {
			kept = append(kept, o)
		}
	}
	return kept
}

// Score is the wasted fraction of the option's cpu capacity plus that of
// its memory capacity (0 = none wasted, 2 = all), the pending pods it
// places counted as used; ok is false when the option has no template to
// measure.
func Score(o expander.Option) (float64, bool) {
	if o.NodeInfo == nil || o.NodeInfo.Node() == nil || o.NodeCount <= 0 {
		return 0, false
	}
	capacity := o.NodeInfo.Node().Status.Capacity
	if len(capacity) == 0 {
		capacity = o.NodeInfo.Node().Status.Allocatable
	}
	availCPU := float64(capacity.Cpu().MilliValue()) * float64(o.NodeCount)
	availMem := float64(capacity.Memory().Value()) * float64(o.NodeCount)
	if availCPU <= 0 || availMem <= 0 {
		return 0, false
	}
	var usedCPU, usedMem float64
	for _, p := range o.Pods {
		req := framework.PodRequests(p)
		usedCPU += float64(req.Cpu().MilliValue())
		usedMem += float64(req.Memory().Value())
	}
	wasteCPU := math.Max(0, (availCPU-usedCPU)/availCPU)
	wasteMem := math.Max(0, (availMem-usedMem)/availMem)
	return wasteCPU + wasteMem, true
}
