package digitalocean

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/digitalocean/godo"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

// TagPrefixMaxHourlyCostCents bounds what a pool's nodes may cost together
// an hour, in whole US cents: DigitalOcean tags may hold letters, digits,
// colons, dashes and underscores, not a decimal point, so $2.50/h is
// k8s-cluster-autoscaler-max-hourly-cost-cents:250. It is read on every
// node group, in either selection mode, and written on the pools node
// autoprovisioning creates when autoprovisioning.max_hourly_cost_per_pool
// is set.
const TagPrefixMaxHourlyCostCents = "k8s-cluster-autoscaler-max-hourly-cost-cents:"

// maxPriceOverride bounds a price override: the dearest DigitalOcean size
// (an 8-GPU droplet) costs tens of dollars an hour; a thousand is a typo.
const maxPriceOverride = 1000.0

var sizeSlug = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// parsePriceOverrides validates the cloud config's price_overrides: size
// slug → USD an hour, for contract prices and for sizes the Sizes API does
// not list. Every error names the field and the entry.
func parsePriceOverrides(in map[string]float64) (map[string]float64, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]float64, len(in))
	slugs := make([]string, 0, len(in))
	for s := range in {
		slugs = append(slugs, s)
	}
	slices.Sort(slugs)
	for _, s := range slugs {
		v := in[s]
		if !sizeSlug.MatchString(s) || len(s) > 64 {
			return nil, fmt.Errorf("price_overrides: %s is not a size slug: want lower-case letters, digits and '-'", showPattern(s))
		}
		if math.IsNaN(v) || v <= 0 || v > maxPriceOverride {
			return nil, fmt.Errorf("price_overrides[%q]: %v is not a price: want USD an hour, more than 0 and at most %v", s, v, maxPriceOverride)
		}
		out[s] = v
	}
	return out, nil
}

// parseMaxHourlyCostPerPool validates autoprovisioning.max_hourly_cost_per_pool
// and returns it in whole cents, as the tag carries it (0: none).
func parseMaxHourlyCostPerPool(v *float64) (int, error) {
	if v == nil {
		return 0, nil
	}
	if math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0.01 || *v > 1e6 {
		return 0, fmt.Errorf("autoprovisioning.max_hourly_cost_per_pool %v is not a limit: want USD an hour, at least 0.01", *v)
	}
	return int(math.Floor(*v*100 + 1e-6)), nil
}

// tagMaxHourlyCostCents reads the pool's hourly cost limit tag: 0 when
// absent; an error when malformed or given twice with different values.
func tagMaxHourlyCostCents(tags []string) (int, error) {
	found, cents := "", 0
	for _, t := range tags {
		raw, ok := strings.CutPrefix(t, TagPrefixMaxHourlyCostCents)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || strings.ContainsAny(raw, "+-") {
			return 0, fmt.Errorf("tag %q: %q is not a non-negative whole number of cents", t, raw)
		}
		if found != "" && n != cents {
			return 0, fmt.Errorf("tags %q and %q disagree", found, t)
		}
		found, cents = t, n
	}
	return cents, nil
}

// maxHourlyCostTag is the tag a created pool carries for a limit of cents.
func maxHourlyCostTag(cents int) string {
	return fmt.Sprintf("%s%d", TagPrefixMaxHourlyCostCents, cents)
}

var _ cloudprovider.HourlyCostLimiter = (*NodeGroup)(nil)

// MaxHourlyCost is the pool's own hourly limit in USD, from its
// TagPrefixMaxHourlyCostCents tag (a pool to be created: the one it will
// carry); 0 means none. A malformed tag refuses the pool as a node group
// (selectPool), so it is never read here.
func (g *NodeGroup) MaxHourlyCost() float64 {
	g.mu.Lock()
	tags := g.pool.Tags
	g.mu.Unlock()
	cents, err := tagMaxHourlyCostCents(tags)
	if err != nil {
		return 0
	}
	return float64(cents) / 100
}

// withOverrides applies the price overrides to the Sizes API's list (a
// listed size keeps its vCPUs and memory at the overridden price, so every
// ranking by price sees it) and returns the price table, where a size the
// list lacks gets the overridden price alone.
func withOverrides(sizes []godo.Size, overrides map[string]float64) ([]godo.Size, map[string]sizePrice) {
	prices := make(map[string]sizePrice, len(sizes)+len(overrides))
	if len(overrides) > 0 {
		sizes = slices.Clone(sizes)
	}
	for i := range sizes {
		if v, ok := overrides[sizes[i].Slug]; ok {
			sizes[i].PriceHourly = v
		}
		s := sizes[i]
		prices[s.Slug] = sizePrice{hourly: s.PriceHourly, vcpus: s.Vcpus, memoryMB: s.Memory}
	}
	for slug, v := range overrides {
		if _, ok := prices[slug]; !ok {
			prices[slug] = sizePrice{hourly: v}
		}
	}
	return sizes, prices
}
