package clusterstate

import (
	"strings"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// Upstream's taint key prefixes that mark startup and status taints without
// a flag (ignore-taint is the deprecated name of startup-taint).
const (
	StartupTaintPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"
	IgnoreTaintPrefix  = "ignore-taint.cluster-autoscaler.kubernetes.io/"
	StatusTaintPrefix  = "status-taint.cluster-autoscaler.kubernetes.io/"
)

// TaintConfig knows the taints that a node carries for a while but that say
// nothing about where pods can run in the long term:
//   - startup taints, put on a new node and removed by an agent once the
//     node is usable (a CNI or storage driver getting ready). A node holding
//     one is not ready yet: it counts as upcoming, so the pods waiting for it
//     do not cause a second scale-up.
//   - status taints, reporting a condition of a ready node. The node stays
//     ready.
//
// Neither belongs in the template of a new node: a pod that does not
// tolerate them will still run on the node once they are gone.
type TaintConfig struct {
	startup, status map[string]bool
	startupPrefixes []string // --startup-taint-prefix
}

// NewTaintConfig reads --startup-taint, --ignore-taint and --status-taint.
func NewTaintConfig(opts config.AutoscalingOptions) TaintConfig {
	c := TaintConfig{startup: map[string]bool{}, status: map[string]bool{}}
	for _, k := range opts.StartupTaints {
		c.startup[k] = true
	}
	for _, k := range opts.StatusTaints {
		c.status[k] = true
	}
	c.startupPrefixes = append([]string{StartupTaintPrefix, IgnoreTaintPrefix}, opts.StartupTaintPrefixes...)
	return c
}

// IsStartupTaint tells a startup taint key: configured, or by prefix.
func (c TaintConfig) IsStartupTaint(key string) bool {
	if c.startup[key] {
		return true
	}
	if c.startupPrefixes == nil {
		return strings.HasPrefix(key, StartupTaintPrefix) || strings.HasPrefix(key, IgnoreTaintPrefix)
	}
	for _, p := range c.startupPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// IsStatusTaint tells a status taint key: configured, or by prefix.
func (c TaintConfig) IsStatusTaint(key string) bool {
	return c.status[key] || strings.HasPrefix(key, StatusTaintPrefix)
}

// HasStartupTaint tells whether the node still holds a startup taint.
func (c TaintConfig) HasStartupTaint(n *apiv1.Node) bool {
	for _, t := range n.Spec.Taints {
		if c.IsStartupTaint(t.Key) {
			return true
		}
	}
	return false
}

// WithoutTransientTaints returns the node without its startup and status
// taints: the node itself when it has none, else a copy.
func (c TaintConfig) WithoutTransientTaints(n *apiv1.Node) *apiv1.Node {
	keep := make([]apiv1.Taint, 0, len(n.Spec.Taints))
	for _, t := range n.Spec.Taints {
		if !c.IsStartupTaint(t.Key) && !c.IsStatusTaint(t.Key) {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(n.Spec.Taints) {
		return n
	}
	out := n.DeepCopy()
	out.Spec.Taints = keep
	return out
}
