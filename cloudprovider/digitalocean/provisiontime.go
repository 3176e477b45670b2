package digitalocean

import (
	"fmt"
	"slices"
	"time"
)

// maxProvisionTime bounds max_node_provision_time_by_size: a droplet that
// has not registered in a day will not.
const maxProvisionTime = 24 * time.Hour

// parseProvisionTimes validates the cloud config's
// max_node_provision_time_by_size: size slug → how long a node of that
// size may take to register before its scale-up is given up, in place of
// --max-node-provision-time. GPU droplets boot slower than the others, and
// a size out of stock shows as nodes that never come: one figure for all
// sizes either gives up on slow sizes or waits long on missing ones.
func parseProvisionTimes(in map[string]string) (map[string]time.Duration, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]time.Duration, len(in))
	slugs := make([]string, 0, len(in))
	for s := range in {
		slugs = append(slugs, s)
	}
	slices.Sort(slugs)
	for _, s := range slugs {
		if !sizeSlug.MatchString(s) || len(s) > 64 {
			return nil, fmt.Errorf("max_node_provision_time_by_size: %s is not a size slug: want lower-case letters, digits and '-'", showPattern(s))
		}
		d, err := time.ParseDuration(in[s])
		if err != nil || d <= 0 || d > maxProvisionTime {
			return nil, fmt.Errorf("max_node_provision_time_by_size[%q]: %s is not a provision time: want a duration such as \"20m\", more than 0 and at most %v",
				s, showPattern(in[s]), maxProvisionTime)
		}
		out[s] = d
	}
	return out, nil
}

// sizeSlug is the droplet size of the group's nodes: its pool's, or the
// size it is planned with.
func (g *NodeGroup) sizeSlug() string {
	if g.planned != nil {
		return g.planned.Slug
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pool == nil {
		return ""
	}
	return g.pool.Size
}
