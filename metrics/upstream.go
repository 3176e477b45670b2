package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The rest of upstream's always-registered metrics. Some are fed here (the
// scale-down gauges, the deprecated GPU counters); the others concern
// features DOKS has no equivalent for (node auto-provisioning, GCE MIGs, DRA)
// or parts of upstream's algorithm this build lacks, and are registered so
// that a dashboard's query finds the metric, as it would with upstream.
var (
	unremovableNodesCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "unremovable_nodes_count",
		Help: "Number of nodes currently considered unremovable by CA.",
	}, []string{"reason"})
	pendingNodeDeletions = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "pending_node_deletions",
		Help: "Number of nodes that haven't been removed or aborted after finished scale-down phase.",
	})
	// Deprecated upstream since 1.36.0, still registered there.
	gpuScaledUpNodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "scaled_up_gpu_nodes_total",
		Help: "Number of GPU nodes added by CA, by GPU name.",
	}, []string{"gpu_resource_name", "gpu_name"})
	gpuFailedScaleUps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "failed_gpu_scale_ups_total",
		Help: "Number of times scale-up operation has failed.",
	}, []string{"reason", "gpu_resource_name", "gpu_name"})
	gpuScaledDownNodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "scaled_down_gpu_nodes_total",
		Help: "Number of GPU nodes removed by CA, by reason and GPU name.",
	}, []string{"reason", "gpu_resource_name", "gpu_name"})
	overflowingControllersCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "overflowing_controllers_count",
		Help: "Number of controllers that own a large set of heterogenous pods, preventing CA from treating these pods as equivalent.",
	})
	createdNodeGroups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "created_node_groups_total",
		Help: "Number of node groups created by Node Autoprovisioning.",
	}, []string{"group_type"})
	deletedNodeGroups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "deleted_node_groups_total",
		Help: "Number of node groups deleted by Node Autoprovisioning.",
	}, []string{"group_type"})
	nodeTaintsCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_taints_count",
		Help: "Number of taints per type used in the cluster.",
	}, []string{"type"})
	inconsistentInstancesMigsCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "inconsistent_instances_migs_count",
		Help: "Number of migs where instance count according to InstanceGroupManagers.List() differs from the results of Instances.List(). Always 0: a GCE metric.",
	})
	binpackingHeterogeneity = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: caNamespace, Name: "binpacking_heterogeneity",
		Help:    "Number of groups of equivalent pods being processed as a part of the same binpacking simulation.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 6),
	}, []string{"instance_type", "cpu_count", "namespace_count"})
	maxNodeSkipEvalDurationSeconds = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "max_node_skip_eval_duration_seconds",
		Help: "Maximum evaluation time of a node being skipped during ScaleDown.",
	})
	nodeRemovalLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: caNamespace, Name: "node_removal_latency_seconds",
		Help:    "Latency from when an unneeded node is eligible for scale down until it is removed (deleted=true) or it became needed again (deleted=false).",
		Buckets: prometheus.ExponentialBuckets(1, 1.5, 19),
	}, []string{"deleted"})
	draNodeTemplateResourcesMismatch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "dra_node_template_resources_mismatch",
		Help: "Count of resource pool mismatches between ready nodes and the node template used to predict them (DRA).",
	}, []string{"driver", "mismatch_type"})
)

// upstreamOnlyCollectors are the collectors declared above, which
// baseCollectors registers with the others.
func upstreamOnlyCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		unremovableNodesCount, pendingNodeDeletions, gpuScaledUpNodes, gpuFailedScaleUps,
		gpuScaledDownNodes, overflowingControllersCount, createdNodeGroups, deletedNodeGroups,
		nodeTaintsCount, inconsistentInstancesMigsCount, binpackingHeterogeneity,
		maxNodeSkipEvalDurationSeconds, nodeRemovalLatency, draNodeTemplateResourcesMismatch,
	}
}

// preCreate exports at zero the series upstream creates at start-up, so
// rate() and alerts over them work before the first event.
func preCreate() {
	for _, t := range allErrorTypes {
		errorsCount.WithLabelValues(t).Add(0)
	}
	for _, r := range []string{FailedScaleUpCloudProviderError, FailedScaleUpAPICallError, FailedScaleUpTimeout} {
		failedScaleUps.WithLabelValues(r, "", "", noDRADrivers).Add(0)
		// Upstream pre-creates scaled_down_nodes_total with the failed
		// scale-up reasons too; the same series are exported here so that a
		// query written against upstream's output finds them.
		scaledDownNodes.WithLabelValues(r, "", "", noDRADrivers).Add(0)
	}
	evictedPods.WithLabelValues("succeeded").Add(0)
	evictedPods.WithLabelValues("failed").Add(0)
	for _, d := range []string{"down", "up"} {
		for _, r := range []string{SkippedCPUResourceLimit, SkippedMemoryResourceLimit} {
			skippedScaleEvents.WithLabelValues(d, r).Add(0)
		}
	}
}

// unremovableReasons remembers the reasons last exported, so that a reason no
// node has any more reads 0 rather than its last count.
var (
	unremovableMu      sync.Mutex
	unremovableReasons = map[string]bool{}
)

// UpdateUnremovableNodesCount sets unremovable_nodes_count{reason} from the
// number of unremovable nodes per reason (upstream's reason names).
func UpdateUnremovableNodesCount(countsByReason map[string]int) {
	unremovableMu.Lock()
	defer unremovableMu.Unlock()
	for r := range unremovableReasons {
		if _, ok := countsByReason[r]; !ok {
			unremovableNodesCount.WithLabelValues(r).Set(0)
		}
	}
	for r, n := range countsByReason {
		unremovableReasons[r] = true
		unremovableNodesCount.WithLabelValues(r).Set(float64(n))
	}
}

// ObservePendingNodeDeletions sets pending_node_deletions: nodes whose
// removal started and has neither finished nor been aborted.
func ObservePendingNodeDeletions(n int) {
	pendingNodeDeletions.Set(float64(n))
}

// RegisterNodeGroupCreation counts a node group (DOKS pool) created by node
// autoprovisioning; the group_type label is empty, as upstream's default.
func RegisterNodeGroupCreation() { createdNodeGroups.WithLabelValues("").Inc() }

// RegisterNodeGroupDeletion counts an autoprovisioned node group deleted.
func RegisterNodeGroupDeletion() { deletedNodeGroups.WithLabelValues("").Inc() }
