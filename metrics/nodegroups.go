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
	nodeGroupBackoffStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_group_backoff_status",
		Help: "Whether or not node group is backoff for not autoscaling. 1 if it is, 0 otherwise.",
	}, []string{"node_group", "reason"})
)

// backoffReasons remembers the reason label last exported per group, so a
// group whose backoff ended or changed reason does not keep a stale series.
var backoffReasons sync.Map // node group → reason

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
	if prev, ok := backoffReasons.Swap(nodeGroup, reason); ok && prev.(string) != reason {
		nodeGroupBackoffStatus.DeleteLabelValues(nodeGroup, prev.(string))
	}
	nodeGroupBackoffStatus.WithLabelValues(nodeGroup, reason).Set(boolToFloat(backedOff))
}

func deleteNodeGroupHealth(nodeGroup string) {
	nodeGroupHealthiness.DeleteLabelValues(nodeGroup)
	if prev, ok := backoffReasons.LoadAndDelete(nodeGroup); ok {
		nodeGroupBackoffStatus.DeleteLabelValues(nodeGroup, prev.(string))
	}
}
