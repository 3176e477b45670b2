package cloudprovider

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiv1 "k8s.io/api/core/v1"
)

// Carried is what the nodes of a node group that does not exist yet must
// carry for the pods it is planned for: labels and taints (the arguments
// of NewNodeGroup beside the machine type). Key is its one identity: the
// scale-up planner groups pending pods by it, and a provider names the
// planned group from it, so that a refused creation backs off the same
// option at the next loop and a pool is found again by its name.
type Carried struct {
	Labels map[string]string
	Taints []apiv1.Taint
}

// Key renders the labels sorted by key, then the taints sorted by key,
// value and effect, a line each: equal for equal labels and taints
// whatever their order, and "" for none. Providers hash it into names:
// changing its format renames the groups they plan.
func (c Carried) Key() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		fmt.Fprintf(&b, "%s=%s\n", k, c.Labels[k])
	}
	taints := slices.Clone(c.Taints)
	slices.SortStableFunc(taints, func(x, y apiv1.Taint) int {
		return cmp.Or(strings.Compare(x.Key, y.Key), strings.Compare(x.Value, y.Value), strings.Compare(string(x.Effect), string(y.Effect)))
	})
	for _, t := range taints {
		fmt.Fprintf(&b, "%s=%s:%s\n", t.Key, t.Value, t.Effect)
	}
	return b.String()
}
