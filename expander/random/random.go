// Package random is the expander that picks any option.
package random

import (
	"math/rand"
	"sync"

	"github.com/doks-autoscaler/cluster-autoscaler/expander"
)

type filter struct {
	mu  sync.Mutex
	rnd *rand.Rand
}

// NewFilter returns a filter keeping one option chosen with rnd (nil: a
// time-seeded source).
func NewFilter(rnd *rand.Rand) expander.Filter {
	if rnd == nil {
		rnd = rand.New(rand.NewSource(rand.Int63()))
	}
	return &filter{rnd: rnd}
}

func (f *filter) BestOptions(options []expander.Option) []expander.Option {
	if len(options) <= 1 {
		return options
	}
	f.mu.Lock()
	i := f.rnd.Intn(len(options))
	f.mu.Unlock()
	return []expander.Option{options[i]}
}
