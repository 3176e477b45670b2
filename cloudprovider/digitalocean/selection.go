package digitalocean

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/digitalocean/godo"
)

// Node pool selection modes (cloud config field node_pool_selection).
const (
	// SelectByAutoScale makes every pool with auto_scale on a node group,
	// bounded by its min_nodes/max_nodes. DOKS's managed autoscaler acts on
	// the same pools, so it must be left off for them.
	SelectByAutoScale = "auto_scale"
	// SelectByTags makes pools with auto_scale off and the tags below node
	// groups, so this autoscaler owns pools the managed one ignores.
	SelectByTags = "tags"
)

// DOKS pool tags read in SelectByTags mode. DigitalOcean tags are plain
// strings of letters, digits, colons, dashes and underscores, so the bounds
// are written as name:value.
const (
	TagAutoscalerEnabled = "k8s-cluster-autoscaler-enabled"
	TagPrefixMinNodes    = "k8s-cluster-autoscaler-min:"
	TagPrefixMaxNodes    = "k8s-cluster-autoscaler-max:"
	// TagConsolidate lets --consolidation-enabled replace or pack the
	// nodes of a pool the autoscaler did not create (in either selection
	// mode; docs/consolidation.md).
	TagConsolidate = "k8s-cluster-autoscaler-consolidate"
	// tagFamilyPrefix is shared by the tags above; a pool carrying one of
	// its tags without the enabled tag is probably a typo worth a warning.
	tagFamilyPrefix = "k8s-cluster-autoscaler-"
)

// selectionRule states a mode's rule for the start-up log.
func selectionRule(mode string) string {
	if mode == SelectByTags {
		return fmt.Sprintf("pools with auto_scale off and tags %s, %s<n>, %s<n> are node groups", TagAutoscalerEnabled, TagPrefixMinNodes, TagPrefixMaxNodes)
	}
	return "pools with auto_scale on are node groups; DOKS's managed autoscaler also acts on such pools, node_pool_selection=tags avoids that"
}

// tagBound reads the one tag with the given prefix: its value must be a
// non-negative whole number. Several tags with the prefix are accepted only
// when they agree.
func tagBound(tags []string, prefix string) (int, error) {
	found, value := "", 0
	for _, t := range tags {
		if !strings.HasPrefix(t, prefix) {
			continue
		}
		raw := t[len(prefix):]
		n, err := strconv.Atoi(raw)
		// Atoi takes signs; a tag value is digits only.
		if err != nil || raw == "" || raw[0] < '0' || raw[0] > '9' {
			return 0, fmt.Errorf("tag %q: %q is not a non-negative whole number", t, raw)
		}
		if found != "" && n != value {
			return 0, fmt.Errorf("tags %q and %q disagree", found, t)
		}
		found, value = t, n
	}
	if found == "" {
		return 0, fmt.Errorf("tag %s<n> is missing", prefix)
	}
	return value, nil
}

// tagBounds reads min and max from a pool's tags; the error names the tag
// at fault.
func tagBounds(tags []string) (minSize, maxSize int, err error) {
	if minSize, err = tagBound(tags, TagPrefixMinNodes); err != nil {
		return 0, 0, err
	}
	if maxSize, err = tagBound(tags, TagPrefixMaxNodes); err != nil {
		return 0, 0, err
	}
	if minSize > maxSize {
		return 0, 0, fmt.Errorf("min %d (tag %s%d) is greater than max %d (tag %s%d)", minSize, TagPrefixMinNodes, minSize, maxSize, TagPrefixMaxNodes, maxSize)
	}
	return minSize, maxSize, nil
}

// familyTags lists the pool's tags that look like this autoscaler's.
func familyTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if strings.HasPrefix(t, tagFamilyPrefix) {
			out = append(out, t)
		}
	}
	return out
}

// poolVerdict is whether a pool is a node group, and why.
type poolVerdict struct {
	group            bool
	minSize, maxSize int
	// note explains the verdict to an operator; warn says it likely needs
	// their attention. A note is logged when it changes (see manager), so
	// it must be stable while the pool does not change.
	note string
	warn bool
	// refused names why a pool that asked to be a node group is not one
	// (refusedBounds, refusedIDs), for the refusal metric; "" otherwise.
	refused string
}

// Reasons a pool is refused as a node group, as the metric labels them.
const (
	refusedBounds   = "bounds"
	refusedIDs      = "ids"
	refusedTemplate = "template"
)

// checkPoolIDs refuses a pool whose ID, name or nodes' IDs could change
// the path of a request built from them.
func checkPoolIDs(p *godo.KubernetesNodePool) error {
	if err := checkPathID("id", p.ID); err != nil {
		return err
	}
	if err := checkPathID("name", p.Name); err != nil {
		return err
	}
	for _, n := range p.Nodes {
		if n == nil {
			continue
		}
		if err := checkPathID("node id", n.ID); err != nil {
			return err
		}
		if n.DropletID != "" {
			if err := checkPathID("node droplet_id", n.DropletID); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAutoScaleBounds applies to min_nodes/max_nodes the rules the tags
// follow, and refuses a negative count.
func checkAutoScaleBounds(p *godo.KubernetesNodePool) error {
	switch {
	case p.MinNodes < 0:
		return fmt.Errorf("min_nodes %d is negative", p.MinNodes)
	case p.MaxNodes < 0:
		return fmt.Errorf("max_nodes %d is negative", p.MaxNodes)
	case p.MinNodes > p.MaxNodes:
		return fmt.Errorf("min_nodes %d is greater than max_nodes %d", p.MinNodes, p.MaxNodes)
	case p.Count < 0:
		return fmt.Errorf("count %d is negative", p.Count)
	}
	return nil
}

// selectPool applies the selection mode to one pool.
func selectPool(mode string, p *godo.KubernetesNodePool) poolVerdict {
	v := selectPoolByMode(mode, p)
	if !v.group {
		return v
	}
	if err := checkPoolIDs(p); err != nil {
		return poolVerdict{warn: true, refused: refusedIDs, note: fmt.Sprintf(
			"node pool %q: %v: not a node group", truncateText(p.Name, 64), err)}
	}
	if p.Count < 0 {
		return poolVerdict{warn: true, refused: refusedBounds, note: fmt.Sprintf(
			"node pool %s (%s) has count %d, which is negative: not a node group", p.Name, p.ID, p.Count)}
	}
	if _, err := tagMaxHourlyCostCents(p.Tags); err != nil {
		// A limit misread would let the pool spend without one.
		return poolVerdict{warn: true, refused: refusedBounds, note: fmt.Sprintf(
			"node pool %s (%s) has %v: not a node group", p.Name, p.ID, err)}
	}
	return v
}

func selectPoolByMode(mode string, p *godo.KubernetesNodePool) poolVerdict {
	if !p.AutoScale && isAutoprovisioned(p) {
		// A pool this autoscaler created is its node group in either mode,
		// bounded by the tags it was created with.
		minSize, maxSize, err := tagBounds(p.Tags)
		if err != nil {
			return poolVerdict{warn: true, refused: refusedBounds, note: fmt.Sprintf("node pool %s (%s) has tag %s but %v: not a node group", p.Name, p.ID, TagAutoprovisioned, err)}
		}
		return poolVerdict{group: true, minSize: minSize, maxSize: maxSize, note: fmt.Sprintf(
			"node pool %s (%s) was created by this autoscaler: a node group with min %d, max %d", p.Name, p.ID, minSize, maxSize)}
	}
	if mode != SelectByTags {
		if !p.AutoScale {
			return poolVerdict{note: fmt.Sprintf("node pool %s (%s) has auto_scale off: not a node group", p.Name, p.ID)}
		}
		if err := checkAutoScaleBounds(p); err != nil {
			return poolVerdict{warn: true, refused: refusedBounds, note: fmt.Sprintf(
				"node pool %s (%s) has auto_scale on but %v: not a node group", p.Name, p.ID, err)}
		}
		return poolVerdict{group: true, minSize: p.MinNodes, maxSize: p.MaxNodes}
	}
	ours := familyTags(p.Tags)
	if p.AutoScale {
		if len(ours) > 0 {
			return poolVerdict{warn: true, note: fmt.Sprintf(
				"node pool %s (%s) carries tags %s but has auto_scale on: DOKS's managed autoscaler owns it, so it is not a node group (turn auto_scale off to hand it to this autoscaler)",
				p.Name, p.ID, strings.Join(ours, ","))}
		}
		return poolVerdict{warn: true, note: fmt.Sprintf(
			"node pool %s (%s) has auto_scale on: DOKS's managed autoscaler owns it, so it is ignored with node_pool_selection=tags",
			p.Name, p.ID)}
	}
	if !slices.Contains(p.Tags, TagAutoscalerEnabled) {
		if len(ours) > 0 {
			return poolVerdict{warn: true, note: fmt.Sprintf(
				"node pool %s (%s) carries tags %s but not the tag %s: not a node group",
				p.Name, p.ID, strings.Join(ours, ","), TagAutoscalerEnabled)}
		}
		return poolVerdict{note: fmt.Sprintf("node pool %s (%s) has no tag %s: not a node group", p.Name, p.ID, TagAutoscalerEnabled)}
	}
	minSize, maxSize, err := tagBounds(p.Tags)
	if err != nil {
		return poolVerdict{warn: true, refused: refusedBounds, note: fmt.Sprintf("node pool %s (%s) has tag %s but %v: not a node group", p.Name, p.ID, TagAutoscalerEnabled, err)}
	}
	return poolVerdict{group: true, minSize: minSize, maxSize: maxSize, note: fmt.Sprintf(
		"node pool %s (%s) is a node group by its tags: min %d, max %d", p.Name, p.ID, minSize, maxSize)}
}
