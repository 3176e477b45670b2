// Package builder turns --cloud-provider into a cloudprovider.CloudProvider.
// Providers register themselves from router files compiled in by build tags
// (see builder_digitalocean.go), so a build can leave providers out.
package builder

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// DefaultCloudProvider is used when --cloud-provider is empty.
const DefaultCloudProvider = "digitalocean"

// Factory builds a provider from the options and the cluster-wide limits.
type Factory func(opts config.AutoscalingOptions, rl *cloudprovider.ResourceLimiter) (cloudprovider.CloudProvider, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// RegisterCloudProvider makes a provider available under name. Registering
// a name twice is a programming error and panics, as in database/sql.
func RegisterCloudProvider(name string, factory func(opts config.AutoscalingOptions, rl *cloudprovider.ResourceLimiter) (cloudprovider.CloudProvider, error)) {
	if name == "" || factory == nil {
		panic("builder: RegisterCloudProvider needs a name and a factory")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[name]; dup {
		panic(fmt.Sprintf("builder: cloud provider %q registered twice", name))
	}
	factories[name] = factory
}

// AvailableProviders lists the providers compiled into this build, sorted.
func AvailableProviders() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Sorted(maps.Keys(factories))
}

// NewCloudProvider builds the provider named by opts.CloudProviderName
// (DefaultCloudProvider when empty). An unknown name is an error listing
// the providers this build offers.
func NewCloudProvider(opts config.AutoscalingOptions) (cloudprovider.CloudProvider, error) {
	name := opts.CloudProviderName
	if name == "" {
		name = DefaultCloudProvider
	}
	mu.RLock()
	factory, ok := factories[name]
	mu.RUnlock()
	if !ok {
		available := AvailableProviders()
		if len(available) == 0 {
			return nil, fmt.Errorf("unknown cloud provider %q: this build has no cloud provider compiled in", name)
		}
		return nil, fmt.Errorf("unknown cloud provider %q: this build offers %s", name, strings.Join(available, ", "))
	}
	klog.InfoS("Building cloud provider", "provider", name)
	// The limiter holds the provider's own limits, none to begin with:
	// --cores-total and --memory-total are merged with them once, by
	// resourcequotas.NewLimits.
	provider, err := factory(opts, cloudprovider.NewResourceLimiter(nil, nil))
	if err != nil {
		return nil, fmt.Errorf("building cloud provider %s: %w", name, err)
	}
	return provider, nil
}
