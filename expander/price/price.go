// Package price is the expander that prefers the cheapest way to host the
// pending pods. An option's score is the hourly price of its new nodes
// divided by the hourly price of the pods it schedules (what the pods would
// cost at the provider's per-resource rate), so it favours cheap nodes that
// the pods fill well. Options within 1% of the best score are ties, broken
// in favour of more pods scheduled and then fewer new nodes.
package price

import (
	"errors"
	"math"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
)

// tieFraction is how close to the best a score must be to count as equal.
const tieFraction = 0.01

type filter struct {
	provider cloudprovider.CloudProvider
	clock    clock.PassiveClock
	warned   sync.Once
}

// NewFilter returns the price filter; clk tells the time prices are asked
// for (nil: the real clock).
func NewFilter(provider cloudprovider.CloudProvider, clk clock.PassiveClock) expander.Filter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &filter{provider: provider, clock: clk}
}

type scored struct {
	opt   expander.Option
	score float64
}

func (f *filter) BestOptions(options []expander.Option) []expander.Option {
	model, err := f.provider.Pricing()
	if err != nil {
		// Without prices this filter cannot tell options apart; let the rest of
		// the chain decide rather than failing the scale-up.
		f.warned.Do(func() {
			if errors.Is(err, cloudprovider.ErrNotImplemented) {
				klog.InfoS("Price expander: the provider has no pricing; passing all options on", "provider", f.provider.Name())
			} else {
				klog.ErrorS(err, "Price expander: pricing unavailable; passing all options on")
			}
		})
		return options
	}
	start := f.clock.Now()
	end := start.Add(time.Hour)
	var all []scored
	for _, o := range options {
		s, err := Score(model, o, start, end)
		if err != nil {
			klog.ErrorS(err, "Price expander: cannot price node group", "nodeGroup", o.NodeGroup.Id())
			continue
		}
		klog.V(5).InfoS("Price expander: option scored", "nodeGroup", o.NodeGroup.Id(), "nodes", o.NodeCount, "pods", len(o.Pods), "score", s)
		all = append(all, scored{o, s})
	}
	if len(all) == 0 {
		return options
	}
	best := math.Inf(1)
	for _, s := range all {
		best = math.Min(best, s.score)
	}
	var ties []expander.Option
	for _, s := range all {
		if s.score <= best+math.Abs(best)*tieFraction+1e-12 {
			ties = append(ties, s.opt)
		}
	}
	return tieBreak(ties)
}

// tieBreak keeps the options scheduling the most pods, then those adding
// the fewest nodes.
func tieBreak(opts []expander.Option) []expander.Option {
	maxPods := -1
	for _, o := range opts {
		if len(o.Pods) > maxPods {
			maxPods = len(o.Pods)
		}
	}
	minNodes := math.MaxInt
	for _, o := range opts {
		if len(o.Pods) == maxPods && o.NodeCount < minNodes {
			minNodes = o.NodeCount
		}
	}
	var out []expander.Option
	for _, o := range opts {
		if len(o.Pods) == maxPods && o.NodeCount == minNodes {
			out = append(out, o)
		}
	}
	return out
}

// Score is an option's score: the price of its new nodes over the price of
// the pods it schedules between start and end (lower is better); the price
// per pod when the model prices none of them. Node autoprovisioning weighs
// the sizes of a new pool by it too.
func Score(model cloudprovider.PricingModel, o expander.Option, start, end time.Time) (float64, error) {
	if o.NodeInfo == nil || o.NodeInfo.Node() == nil {
		return 0, errors.New("no template node")
	}
	nodePrice, err := model.NodePrice(o.NodeInfo.Node(), start, end)
	if err != nil {
		return 0, err
	}
	nodesPrice := nodePrice * float64(o.NodeCount)
	var podsPrice float64
	for _, p := range o.Pods {
		pp, err := model.PodPrice(p, start, end)
		if err != nil {
			return 0, err
		}
		podsPrice += pp
	}
	if podsPrice > 0 {
		return nodesPrice / podsPrice, nil
	}
	// Pods with no requests are priced at zero: fall back to price per pod.
	if len(o.Pods) > 0 {
		return nodesPrice / float64(len(o.Pods)), nil
	}
	return nodesPrice, nil
}
