package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Cluster-state metrics fed by the registry (clusterstate): nodes that failed
// to come, unregistered nodes removed, and per node group health and
// backoff. Names, types and labels are upstream's.
var (
	failedNodeCreations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "failed_node_creations_total",
		Help: "Number of nodes that CA failed to add.",
	}, []string{"reason"})
	oldUnregisteredNodesRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "old_unregistered_nodes_removed_count",
		Help: "Number of unregistered nodes removed by CA.",
	})
	// Per node group, registered only with --emit-per-nodegroup-metrics.
	nodeGroupHealthiness = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_group_healthiness",
		Help: "Whether or not node group is healthy enough for autoscaling. 1 if it is, 0 otherwise.",
	}, []string{"node_group"})
	nodeGroupBackoffStatus = newReasonGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_group_backoff_status",
		Help: "Whether or not node group is backoff for not autoscaling. 1 if it is, 0 otherwise.",
	})
)

// reasonGauge is a gauge per node group and reason where a group has one
// reason at a time: it remembers the reason it last exported per group, so
// that a group whose backoff ended or changed reason keeps no stale series.
type reasonGauge struct {
	vec  *prometheus.GaugeVec
	mu   sync.Mutex
	last map[string]string // node group → reason
}

func newReasonGauge(opts prometheus.GaugeOpts) *reasonGauge {
	return &reasonGauge{vec: prometheus.NewGaugeVec(opts, []string{"node_group", "reason"}), last: map[string]string{}}
}

// set exports v for the group under reason, and deletes the group's series
// of another reason.
func (g *reasonGauge) set(nodeGroup, reason string, v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev, ok := g.last[nodeGroup]; ok && prev != reason {
		g.vec.DeleteLabelValues(nodeGroup, prev)
	}
	g.last[nodeGroup] = reason
	g.vec.WithLabelValues(nodeGroup, reason).Set(v)
}

// delete removes the group's series.
func (g *reasonGauge) delete(nodeGroup string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev, ok := g.last[nodeGroup]; ok {
		g.vec.DeleteLabelValues(nodeGroup, prev)
		delete(g.last, nodeGroup)
	}
}

// RegisterFailedNodeCreations counts n nodes that a failed scale-up did not
// bring (per node, where failed_scale_ups_total counts operations).
func RegisterFailedNodeCreations(reason string, n int) {
	if n > 0 {
		failedNodeCreations.WithLabelValues(reason).Add(float64(n))
	}
}

// RegisterOldUnregisteredNodesRemoved counts instances removed because they
// never registered as Nodes.
func RegisterOldUnregisteredNodesRemoved(n int) {
	if n > 0 {
		oldUnregisteredNodesRemoved.Add(float64(n))
	}
}

// UpdateNodeGroupHealth sets node_group_healthiness and
// node_group_backoff_status (reason: the backoff's error code, "" when not
// backed off); a no-op unless RegisterAll was called with
// emitPerNodeGroupMetrics.
func UpdateNodeGroupHealth(nodeGroup string, healthy, backedOff bool, reason string) {
	if !perNodeGroupEnabled.Load() {
		return
	}
	nodeGroupHealthiness.WithLabelValues(nodeGroup).Set(boolToFloat(healthy))
	if !backedOff {
		reason = ""
	}
	nodeGroupBackoffStatus.set(nodeGroup, reason, boolToFloat(backedOff))
}

func deleteNodeGroupHealth(nodeGroup string) {
	nodeGroupHealthiness.DeleteLabelValues(nodeGroup)
	nodeGroupBackoffStatus.delete(nodeGroup)
}
