package cloudprovider

import (
	"fmt"
	"sort"
	"strings"
)

// Resource names used in cluster-wide limits.
const (
	ResourceNameCores  = "cpu"
	ResourceNameMemory = "memory"
)

// ResourceLimiter holds cluster-wide min and max totals per resource
// (cores, memory in bytes, GPUs).
type ResourceLimiter struct {
	minLimits map[string]int64
	maxLimits map[string]int64
}

// NewResourceLimiter returns a limiter with the given bounds.
func NewResourceLimiter(minLimits, maxLimits map[string]int64) *ResourceLimiter {
	copyMap := func(m map[string]int64) map[string]int64 {
		out := make(map[string]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return &ResourceLimiter{minLimits: copyMap(minLimits), maxLimits: copyMap(maxLimits)}
}

// GetMin returns the minimum for a resource, 0 when unset.
func (r *ResourceLimiter) GetMin(resourceName string) int64 { return r.minLimits[resourceName] }

// GetMax returns the maximum for a resource, 0 when unset.
func (r *ResourceLimiter) GetMax(resourceName string) int64 { return r.maxLimits[resourceName] }

// GetResources lists the resources that have a limit.
func (r *ResourceLimiter) GetResources() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]int64{r.minLimits, r.maxLimits} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// HasMaxLimitSet reports whether a maximum is set for the resource.
func (r *ResourceLimiter) HasMaxLimitSet(resourceName string) bool {
	_, ok := r.maxLimits[resourceName]
	return ok
}

func (r *ResourceLimiter) String() string {
	var parts []string
	for _, name := range r.GetResources() {
		parts = append(parts, fmt.Sprintf("{%s : %d - %d}", name, r.GetMin(name), r.GetMax(name)))
	}
	return strings.Join(parts, ", ")
}
