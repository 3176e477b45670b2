package digitalocean

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// The flags whose defaults the cluster's own autoscaler settings replace.
const (
	flagUtilizationThreshold = "scale-down-utilization-threshold"
	flagUnneededTime         = "scale-down-unneeded-time"
)

// clusterSettings are the cluster's cluster_autoscaler_configuration, which
// DOKS users set with doctl or the control panel. They replace the defaults
// of the matching flags when those are not given on the command line, so an
// operator keeps one place to tune scale-down. A field the cluster leaves
// unset, or sets to a value that makes no sense, is nil.
type clusterSettings struct {
	utilizationThreshold *float64
	unneededTime         *time.Duration
	// expanders are reported, not applied: the expander is chosen once at
	// start-up from --expander.
	expanders []string
	// problems are the values that were ignored, and why.
	problems []string
}

func parseClusterSettings(c *godo.KubernetesClusterAutoscalerConfiguration) clusterSettings {
	var s clusterSettings
	if c == nil {
		return s
	}
	if t := c.ScaleDownUtilizationThreshold; t != nil {
		if *t > 0 && *t <= 1 {
			s.utilizationThreshold = t
		} else {
			s.problems = append(s.problems, fmt.Sprintf("scale_down_utilization_threshold %v is not in (0, 1]", *t))
		}
	}
	if u := c.ScaleDownUnneededTime; u != nil && *u != "" {
		d, err := time.ParseDuration(*u)
		switch {
		case err != nil:
			s.problems = append(s.problems, fmt.Sprintf("scale_down_unneeded_time %q is not a duration", *u))
		case d <= 0:
			s.problems = append(s.problems, fmt.Sprintf("scale_down_unneeded_time %q is not positive", *u))
		default:
			s.unneededTime = &d
		}
	}
	s.expanders = c.Expanders
	return s
}

// applyTo returns defaults with the cluster's values in place of those of
// flags not given.
func (s clusterSettings) applyTo(defaults config.NodeGroupAutoscalingOptions, given map[string]bool) config.NodeGroupAutoscalingOptions {
	if s.utilizationThreshold != nil && !given[flagUtilizationThreshold] {
		defaults.ScaleDownUtilizationThreshold = *s.utilizationThreshold
	}
	if s.unneededTime != nil && !given[flagUnneededTime] {
		defaults.ScaleDownUnneededTime = *s.unneededTime
	}
	return defaults
}

// describe says, for the log, what the cluster sets and what of it applies.
func (s clusterSettings) describe(given map[string]bool) string {
	var parts []string
	verdict := func(flag string) string {
		if given[flag] {
			return "not used: --" + flag + " is given"
		}
		return "used for every node group"
	}
	if s.utilizationThreshold != nil {
		parts = append(parts, fmt.Sprintf("scale_down_utilization_threshold=%v (%s)", *s.utilizationThreshold, verdict(flagUtilizationThreshold)))
	}
	if s.unneededTime != nil {
		parts = append(parts, fmt.Sprintf("scale_down_unneeded_time=%v (%s)", *s.unneededTime, verdict(flagUnneededTime)))
	}
	if len(s.expanders) > 0 {
		parts = append(parts, fmt.Sprintf("expanders=%v (not used: the expander comes from --expander)", s.expanders))
	}
	for _, p := range s.problems {
		parts = append(parts, "ignored: "+p)
	}
	if len(parts) == 0 {
		return "none set"
	}
	return strings.Join(parts, "; ")
}

// refreshCluster reads the cluster object for its region and autoscaler
// settings when they are older than settingsTTL. Once the region is known
// and every flag the settings could replace is given, it reads nothing more.
// A failure keeps what was read last and is tried again after settingsTTL,
// not at every Refresh: steady state stays one request per Refresh even
// against an endpoint that refuses the cluster read. It never fails the
// Refresh.
func (m *manager) refreshCluster(ctx context.Context, now time.Time) {
	m.mu.RLock()
	done := m.region != "" && m.flagsGiven[flagUtilizationThreshold] && m.flagsGiven[flagUnneededTime]
	fresh := !m.settingsAt.IsZero() && now.Sub(m.settingsAt) < m.o.settingsTTL
	previous := m.settings.describe(m.flagsGiven)
	m.mu.RUnlock()
	if done || fresh {
		return
	}
	cluster, err := m.client.getCluster(ctx)
	if err != nil {
		m.mu.Lock()
		m.settingsAt = now
		m.mu.Unlock()
		klog.InfoS("Reading the cluster's autoscaler settings (cluster_autoscaler_configuration) failed; keeping the settings last read", "cluster", m.client.clusterID,
			"retryIn", m.o.settingsTTL, "err", err)
		return
	}
	s := parseClusterSettings(cluster.ClusterAutoscalerConfiguration)
	m.mu.Lock()
	first := !m.settingsRead
	m.settings, m.settingsAt, m.settingsRead = s, now, true
	if cluster.RegionSlug != "" && m.region != cluster.RegionSlug {
		m.region = cluster.RegionSlug
		klog.V(2).InfoS("Cluster region: template nodes are labelled with it", "cluster", m.client.clusterID, "label", apiv1.LabelTopologyRegion, "region", m.region)
	}
	m.mu.Unlock()
	if d := s.describe(m.flagsGiven); first || d != previous {
		if len(s.problems) > 0 {
			klog.ErrorS(nil, "Cluster autoscaler settings: invalid values ignored", "cluster", m.client.clusterID, "settings", d)
		} else {
			klog.InfoS("Cluster autoscaler settings", "cluster", m.client.clusterID, "settings", d)
		}
	}
}

// nodeGroupOptions are the options every node group of the cluster gets.
func (m *manager) nodeGroupOptions(defaults config.NodeGroupAutoscalingOptions) config.NodeGroupAutoscalingOptions {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.settings.applyTo(defaults, m.flagsGiven)
}
