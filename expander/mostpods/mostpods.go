// Package mostpods is the expander that prefers the option scheduling the
// most pending pods.
package mostpods

import "github.com/doks-autoscaler/cluster-autoscaler/expander"

type filter struct{}

// NewFilter returns the most-pods filter.
func NewFilter() expander.Filter { return filter{} }

func (filter) BestOptions(options []expander.Option) []expander.Option {
	best := -1
	var out []expander.Option
	for _, o := range options {
		switch n := len(o.Pods); {
		case n > best:
			best = n
			out = []expander.Option{o}
		case n == best:
			out = append(out, o)
		}
	}
	return out
}
