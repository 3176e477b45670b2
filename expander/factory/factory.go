// Package factory builds the expander chain named by --expander.
package factory

import (
	"fmt"
	"math/rand"
	"strings"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/mostpods"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/price"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/priority"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/random"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/waste"
)

// Build returns the strategy for names (applied in order, e.g.
// ["priority", "least-waste"]). configMaps lists ConfigMaps in the
// autoscaler's namespace (needed by "priority"), recorder records a
// priorities ConfigMap it ignores (may be nil); rnd seeds random choices
// (nil: time-seeded); clk is the clock for pricing (nil: the real clock).
func Build(names []string, provider cloudprovider.CloudProvider, configMaps corelisters.ConfigMapNamespaceLister,
	recorder priority.Recorder, rnd *rand.Rand, clk clock.PassiveClock) (expander.Strategy, error) {
	if len(names) == 0 {
		names = []string{expander.LeastWasteExpanderName}
	}
	if rnd == nil {
		rnd = rand.New(rand.NewSource(time.Now().UnixNano()))
	}
	seen := map[string]bool{}
	var filters []expander.Filter
	for _, raw := range names {
		name := strings.TrimSpace(raw)
		if seen[name] {
			return nil, fmt.Errorf("expander %q listed twice", name)
		}
		seen[name] = true
		switch name {
		case expander.RandomExpanderName:
			filters = append(filters, random.NewFilter(rnd))
		case expander.MostPodsExpanderName:
			filters = append(filters, mostpods.NewFilter())
		case expander.LeastWasteExpanderName:
			filters = append(filters, waste.NewFilter())
		case expander.PriceBasedExpanderName:
			filters = append(filters, price.NewFilter(provider, clk))
		case expander.PriorityBasedExpanderName:
			if configMaps == nil {
				return nil, fmt.Errorf("expander %q needs a ConfigMap lister", name)
			}
			filters = append(filters, priority.NewFilter(configMaps, recorder))
		default:
			return nil, fmt.Errorf("unknown expander %q (available: %s)", name, strings.Join(expander.AvailableExpanders, ", "))
		}
	}
	return expander.NewChain(filters, rnd), nil
}
