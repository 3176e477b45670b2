// Package resourcequotas owns the cluster's live nodes, their totals (node
// count, CPU, memory) and the cluster-wide limits on them: --max-nodes-total,
// --cores-total and --memory-total merged with the provider's resource
// limiter, and money: --max-hourly-cost over the autoscaled groups' nodes
// and node groups' own hourly limits (money.go). Scale-up asks it how many nodes of a template still fit under the
// maxima, scale-down whether removing a node keeps the cluster above the
// minima, min-size enforcement both; the reporter exports what it counted.
// It is where capacity quotas and the limits of node pools created on
// demand plug in; upstream's resourcequotas package (tracker, usage) is the
// model.
package resourcequotas

import (
	"errors"
	"fmt"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// Resource names a limited resource; the empty Resource names none.
type Resource string

// The resources the cluster-wide limits bound, in the order they are checked.
const (
	Nodes  Resource = "nodes"
	CPU    Resource = "cpu"
	Memory Resource = "memory"
)

// Limits are the cluster-wide bounds. A zero maximum means no limit.
type Limits struct {
	MaxNodes                 int
	MinMilliCPU, MaxMilliCPU int64
	MinMemory, MaxMemory     int64
	// Money: --max-hourly-cost and the prices of nodes; nil when there is
	// no pricing model and no money limit.
	Money *Money
	// Instances is the account's instance quota (DigitalOcean's droplet
	// limit) when the provider knows it; nil otherwise.
	Instances *cloudprovider.InstanceQuota
}

// NewLimits merges the flags with the provider's resource limiter: for each
// maximum the tighter bound wins and for each minimum the larger, so the
// flags always apply. When the provider cannot say its limits, the flags
// alone apply and the error is returned for the caller to log.
func NewLimits(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider) (Limits, error) {
	l := Limits{
		MaxNodes:    opts.MaxNodesTotal,
		MinMilliCPU: opts.MinCoresTotal * 1000, MaxMilliCPU: opts.MaxCoresTotal * 1000,
		MinMemory: opts.MinMemoryTotal, MaxMemory: opts.MaxMemoryTotal,
	}
	money, moneyErr := moneyLimits(opts.MaxHourlyCost, provider)
	l.Money = money
	if qr, ok := provider.(cloudprovider.InstanceQuotaReporter); ok {
		if q, known := qr.InstanceQuota(); known {
			l.Instances = &q
		}
	}
	rl, err := provider.GetResourceLimiter()
	if err != nil {
		return l, errors.Join(moneyErr, fmt.Errorf("provider resource limits unavailable, using the flags alone: %w", err))
	}
	if moneyErr != nil {
		return l, moneyErr
	}
	if rl == nil {
		return l, nil
	}
	if rl.HasMaxLimitSet(cloudprovider.ResourceNameCores) {
		l.MaxMilliCPU = tighterMax(l.MaxMilliCPU, rl.GetMax(cloudprovider.ResourceNameCores)*1000)
	}
	if rl.HasMaxLimitSet(cloudprovider.ResourceNameMemory) {
		l.MaxMemory = tighterMax(l.MaxMemory, rl.GetMax(cloudprovider.ResourceNameMemory))
	}
	l.MinMilliCPU = max(l.MinMilliCPU, rl.GetMin(cloudprovider.ResourceNameCores)*1000)
	l.MinMemory = max(l.MinMemory, rl.GetMin(cloudprovider.ResourceNameMemory))
	return l, nil
}

// tighterMax returns the smaller of two maxima, where 0 or less means none.
func tighterMax(flag, limiter int64) int64 {
	if flag <= 0 || limiter < flag {
		return limiter
	}
	return flag
}

// ClusterMaxNodes is how many nodes the cluster may grow to with node
// groups whose maxima add up to groupMaxima: that sum, bounded by MaxNodes
// (--max-nodes-total) when set.
func (l Limits) ClusterMaxNodes(groupMaxima int) int {
	if l.MaxNodes > 0 && groupMaxima > l.MaxNodes {
		return l.MaxNodes
	}
	return groupMaxima
}
