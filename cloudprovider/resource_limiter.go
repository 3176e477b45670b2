package cloudprovider

import (
	"fmt"
	"maps"
	"slices"
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
	return &ResourceLimiter{minLimits: maps.Clone(minLimits), maxLimits: maps.Clone(maxLimits)}
}

// GetMin returns the minimum for a resource, 0 when unset.
func (r *ResourceLimiter) GetMin(resourceName string) int64 { return r.minLimits[resourceName] }

// GetMax returns the maximum for a resource, 0 when unset.
func (r *ResourceLimiter) GetMax(resourceName string) int64 { return r.maxLimits[resourceName] }

// GetResources lists the resources that have a limit.
func (r *ResourceLimiter) GetResources() []string {
	names := slices.AppendSeq(slices.Collect(maps.Keys(r.minLimits)), maps.Keys(r.maxLimits))
	slices.Sort(names)
	return slices.Compact(names)
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
