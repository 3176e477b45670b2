package digitalocean

import (
	"errors"
	"fmt"
	"slices"

	"github.com/digitalocean/godo"
	"k8s.io/klog/v2"
)

// parseSizePreference validates autoprovisioning.size_preference against
// the section's allowed sizes; nil when the field is absent. Every error
// names the field and the entry.
//
// The rule is "the listed sizes only, first listed first": a workload that
// accepts H100, then L40S, then MI300X must not get a cheaper size it did
// not name, so a size left out is never used, even when it is allowed by
// autoprovisioning.sizes. "Listed first, then the rest by price" was
// rejected: with GPU sizes the rest would be whatever is cheapest (a CPU
// size never fits a GPU pod, but a cheaper GPU the workload was not
// qualified on would), which the operator cannot see from the list.
func parseSizePreference(list []string, c *autoprovisioningConfig) ([]string, error) {
	if list == nil {
		return nil, nil
	}
	if len(list) == 0 {
		return nil, errors.New(`autoprovisioning.size_preference is empty: leave it out (every allowed size, cheapest first) or list sizes, the first preferred, e.g. ["gpu-h100x1-80gb", "gpu-l40sx1-48gb"]`)
	}
	out := make([]string, 0, len(list))
	for i, s := range list {
		switch {
		case s == "":
			return nil, fmt.Errorf("autoprovisioning.size_preference[%d] is empty: want a droplet size slug", i)
		case !sizeSlug.MatchString(s) || len(s) > 64: // one size each: no wildcards
			return nil, fmt.Errorf("autoprovisioning.size_preference[%d] %s is not a size slug: want lower-case letters, digits and '-', no wildcards (each entry is one size)", i, showPattern(s))
		case slices.Contains(out, s):
			return nil, fmt.Errorf("autoprovisioning.size_preference[%d] %q is listed twice (first at [%d])", i, s, slices.Index(out, s))
		case !c.allows(s):
			return nil, fmt.Errorf("autoprovisioning.size_preference[%d] %q is not allowed by autoprovisioning.sizes %q: a preferred size must also be allowed", i, s, c.sizes)
		}
		out = append(out, s)
	}
	return out, nil
}

// unknownPreferred says which preferred sizes the Sizes API does not list,
// each as an error naming the entry; none without a preference or a
// catalogue. Known only once the catalogue is fetched, after start-up.
func (c *autoprovisioningConfig) unknownPreferred(catalog []godo.Size) []error {
	if len(catalog) == 0 {
		return nil
	}
	var out []error
	for i, s := range c.sizePreference {
		if !slices.ContainsFunc(catalog, func(z godo.Size) bool { return z.Slug == s }) {
			out = append(out, fmt.Errorf("autoprovisioning.size_preference[%d] %q is not a size the Sizes API lists (%d sizes): it is never used", i, s, len(catalog)))
		}
	}
	return out
}

// inPreferenceOrder orders the offered sizes (allowed, available, in the
// region) by the preference, leaving out the sizes it does not list;
// without a preference it returns them as they are (cheapest first). A
// preferred size the catalogue does not list is logged, once per size.
func (c *autoprovisioningConfig) inPreferenceOrder(offered, catalog []godo.Size) []godo.Size {
	if c.sizePreference == nil {
		return offered
	}
	for _, err := range c.unknownPreferred(catalog) {
		if _, seen := c.loggedUnknown.LoadOrStore(err.Error(), true); !seen {
			klog.ErrorS(err, "Node autoprovisioning: a preferred size is unknown")
		}
	}
	out := make([]godo.Size, 0, len(c.sizePreference))
	for _, slug := range c.sizePreference {
		if i := slices.IndexFunc(offered, func(s godo.Size) bool { return s.Slug == slug }); i >= 0 {
			out = append(out, offered[i])
		}
	}
	return out
}

// MachineTypesByPreference reports whether GetAvailableMachineTypes lists
// the sizes in the operator's order (autoprovisioning.size_preference)
// rather than cheapest first. The planner should then create the first
// listed size that fits the pods within the limits, not the cheapest per
// pod: the list is already cut to what can be had now (allowed, available,
// in the region, not held unavailable), so the first that helps is the
// preferred one that can be had.
func (p *CloudProvider) MachineTypesByPreference() bool {
	return p.m.autoprovisioning != nil && p.m.autoprovisioning.sizePreference != nil
}
