// Package expander chooses which node group grows when several could host the
// pending pods. Each expander is a Filter that keeps the best options (ties
// kept); a chain applies them in the order given by --expander and, if more
// than one option survives the last filter, picks one at random.
package expander

import (
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Expander names accepted by --expander.
const (
	RandomExpanderName        = "random"
	MostPodsExpanderName      = "most-pods"
	LeastWasteExpanderName    = "least-waste"
	PriceBasedExpanderName    = "price"
	PriorityBasedExpanderName = "priority"
)

// AvailableExpanders lists the names Build accepts.
var AvailableExpanders = []string{RandomExpanderName, MostPodsExpanderName, LeastWasteExpanderName,
	PriceBasedExpanderName, PriorityBasedExpanderName}

// Option is one way to help the pending pods: add NodeCount nodes like
// NodeInfo (the group's template) to NodeGroup, which would host Pods.
type Option struct {
	NodeGroup cloudprovider.NodeGroup
	NodeCount int
	Pods      []*apiv1.Pod
	NodeInfo  *framework.NodeInfo
	Debug     string
}

// Filter keeps the best of the options. It never returns an empty slice for
// a non-empty input, and never invents options.
type Filter interface {
	BestOptions(options []Option) []Option
}

// Strategy picks one option, or nil when there are none.
type Strategy interface {
	BestOption(options []Option) *Option
}

// Chain applies filters in order and breaks remaining ties at random.
type Chain struct {
	filters []Filter
	mu      sync.Mutex
	rnd     *rand.Rand
}

// NewChain builds a strategy from filters; rnd breaks final ties (nil: a
// time-seeded source).
func NewChain(filters []Filter, rnd *rand.Rand) *Chain {
	if rnd == nil {
		rnd = rand.New(rand.NewSource(rand.Int63()))
	}
	return &Chain{filters: filters, rnd: rnd}
}

// BestOption implements Strategy.
func (c *Chain) BestOption(options []Option) *Option {
	if len(options) == 0 {
		return nil
	}
	// Stable input order so a seeded tie-break is reproducible whatever
	// order the provider listed groups in.
	opts := slices.Clone(options)
	sort.SliceStable(opts, func(i, j int) bool { return opts[i].NodeGroup.Id() < opts[j].NodeGroup.Id() })
	for _, f := range c.filters {
		if len(opts) <= 1 {
			break
		}
		if out := f.BestOptions(opts); len(out) > 0 {
			opts = out
		}
	}
	// On a tie an existing node group is preferred to one that would have
	// to be created (node autoprovisioning).
	if existing := slices.DeleteFunc(slices.Clone(opts), func(o Option) bool { return !o.NodeGroup.Exist() }); len(existing) > 0 {
		opts = existing
	}
	if len(opts) == 1 {
		return &opts[0]
	}
	c.mu.Lock()
	i := c.rnd.Intn(len(opts))
	c.mu.Unlock()
	return &opts[i]
}

// GroupIDs lists option group ids, for logs.
func GroupIDs(options []Option) string {
	ids := make([]string, 0, len(options))
	for _, o := range options {
		ids = append(ids, o.NodeGroup.Id())
	}
	return strings.Join(ids, ",")
}
