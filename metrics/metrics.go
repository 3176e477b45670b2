// Package metrics holds the autoscaler's Prometheus metrics. Names and labels
// follow upstream cluster-autoscaler (all prefixed cluster_autoscaler_) so that
// existing dashboards and alerts keep working; the DigitalOcean API metrics are
// this project's own. docs/metrics.md lists every metric.
//
// The collectors are package-level so every layer can record without plumbing
// a handle through; updating a collector that was never registered is a cheap
// no-op as far as any scrape is concerned. It imports no other package of the
// project, so any layer may record here without an import cycle.
package metrics

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "k8s.io/component-base/metrics/prometheus/restclient" // client-go's rest_client_* metrics, in legacyregistry as upstream
	"k8s.io/klog/v2"
)

const caNamespace = "cluster_autoscaler"

// FunctionLabel names a timed piece of the loop in function_duration_seconds.
type FunctionLabel string

// Function labels, spelled as upstream's so dashboards keep their queries.
const (
	Main                 FunctionLabel = "main"
	ScaleUp              FunctionLabel = "scaleUp"
	ScaleDown            FunctionLabel = "scaleDown"
	CloudProviderRefresh FunctionLabel = "cloudProviderRefresh"
	UpdateClusterState   FunctionLabel = "updateClusterState"
	FilterOutSchedulable FunctionLabel = "filterOutSchedulable"
	FindUnneeded         FunctionLabel = "findUnneeded"
	LoopWait             FunctionLabel = "loopWait"
	// Sub-steps carry their parent's name before a colon, as upstream.
	Estimate                   FunctionLabel = "scaleUp:estimate"
	BuildPodEquivalenceGroups  FunctionLabel = "scaleUp:buildPodEquivalenceGroups"
	ScaleDownNodeDeletion      FunctionLabel = "scaleDown:nodeDeletion"
	ScaleDownSoftTaintUnneeded FunctionLabel = "scaleDown:softTaintUnneeded"
)

// Error types counted by errors_total; every one is exported at 0 from the
// start so rate() and alerts work before the first failure.
const (
	CloudProviderError            = "cloudProviderError"
	APICallError                  = "apiCallError"
	InternalError                 = "internalError"
	TransientError                = "transientError"
	ConfigurationError            = "configurationError"
	NodeGroupDoesNotExistError    = "nodeGroupDoesNotExistError"
	UnexpectedScaleDownStateError = "unexpectedScaleDownStateError"
)

var allErrorTypes = []string{
	CloudProviderError, APICallError, InternalError, TransientError,
	ConfigurationError, NodeGroupDoesNotExistError, UnexpectedScaleDownStateError,
}

// Failed scale-up reasons (failed_scale_ups_total{reason}).
const (
	FailedScaleUpCloudProviderError = "cloudProviderError"
	FailedScaleUpAPICallError       = "apiCallError"
	FailedScaleUpTimeout            = "timeout"
	// FailedScaleUpSizeUnavailable: the size cannot be had in the region
	// now (not in upstream).
	FailedScaleUpSizeUnavailable = "sizeUnavailable"
)

// Scale-down reasons (scaled_down_nodes_total{reason}).
const (
	ScaleDownUnderutilized = "underutilized"
	ScaleDownEmpty         = "empty"
	ScaleDownUnready       = "unready"
)

// Skipped scale-event reasons (skipped_scale_events_count{reason}).
const (
	SkippedCPUResourceLimit     = "CpuResourceLimit"
	SkippedMemoryResourceLimit  = "MemoryResourceLimit"
	SkippedMaxNodesTotalReached = "MaxNodesTotalReached"
	// SkippedHourlyCostLimit: --max-hourly-cost (not in upstream).
	SkippedHourlyCostLimit = "HourlyCostLimit"
	// SkippedDropletQuota: the account's droplet limit (not in upstream).
	SkippedDropletQuota = "DropletQuota"
)

// Activities for last_activity{activity}.
const (
	ActivityMain           = "main"
	ActivityMainSuccessful = "mainSuccessful"
	ActivityAutoscaling    = "autoscaling"
	ActivityScaleUp        = "scaleUp"
	ActivityScaleDown      = "scaleDown"
)

var (
	clusterSafeToAutoscale = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "cluster_safe_to_autoscale",
		Help: "Whether or not cluster is healthy enough for autoscaling. 1 if it is, 0 otherwise.",
	})
	nodesCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "nodes_count",
		Help: "Number of nodes in cluster.",
	}, []string{"state"})
	nodeGroupsCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_groups_count",
		Help: "Number of node groups managed by CA.",
	}, []string{"node_group_type"})
	unschedulablePodsCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "unschedulable_pods_count",
		Help: "Number of unschedulable pods in the cluster.",
	}, []string{"type"})
	maxNodesCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "max_nodes_count",
		Help: "Maximum number of nodes in all node groups.",
	})
	clusterCPUCurrentCores = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "cluster_cpu_current_cores",
		Help: "Current number of cores in the cluster, minus deleting nodes.",
	})
	cpuLimitsCores = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "cpu_limits_cores",
		Help: "Minimum and maximum number of cores in the cluster.",
	}, []string{"direction"})
	clusterMemoryCurrentBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "cluster_memory_current_bytes",
		Help: "Current number of bytes of memory in the cluster, minus deleting nodes.",
	})
	memoryLimitsBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "memory_limits_bytes",
		Help: "Minimum and maximum number of bytes of memory in cluster.",
	}, []string{"direction"})
	lastActivity = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "last_activity",
		Help: "Last time certain part of CA logic executed (unix seconds).",
	}, []string{"activity"})
	functionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: caNamespace, Name: "function_duration_seconds",
		Help: "Time taken by various parts of CA main loop.",
		// Upstream's buckets, so its dashboards' histogram_quantile reads
		// the same: 0.1 s to 30 min.
		Buckets: prometheus.ExponentialBucketsRange(0.1, 1800, 150),
	}, []string{"function"})
	functionDurationSummary = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Namespace: caNamespace, Name: "function_duration_quantile_seconds",
		Help:       "Quantiles of time taken by various parts of CA main loop.",
		Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		MaxAge:     time.Hour, // upstream's sliding window
	}, []string{"function"})
	scaledUpNodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "scaled_up_nodes_total",
		Help: "Number of nodes added by CA.",
	}, []string{"gpu_resource_name", "gpu_name", "dra_drivers"})
	failedScaleUps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "failed_scale_ups_total",
		Help: "Number of times scale-up operation has failed.",
	}, []string{"reason", "gpu_resource_name", "gpu_name", "dra_drivers"})
	scaledDownNodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "scaled_down_nodes_total",
		Help: "Number of nodes removed by CA.",
	}, []string{"reason", "gpu_resource_name", "gpu_name", "dra_drivers"})
	evictedPods = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "evicted_pods_total",
		Help: "Number of pods evicted by CA.",
	}, []string{"eviction_result"})
	errorsCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "errors_total",
		Help: "The number of CA loops failed due to an error.",
	}, []string{"type"})
	unneededNodesCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "unneeded_nodes_count",
		Help: "Number of nodes currently considered unneeded by CA.",
	})
	scaleDownInCooldown = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "scale_down_in_cooldown",
		Help: "Whether or not the scale down is in cooldown. 1 if its, 0 otherwise.",
	})
	skippedScaleEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "skipped_scale_events_count",
		Help: "Count of scaling events that the CA has chosen to skip.",
	}, []string{"direction", "reason"})

	// Per node group gauges: registered only with --emit-per-nodegroup-metrics
	// since their cardinality grows with the number of pools.
	nodeGroupMinCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_group_min_count",
		Help: "Minimum number of nodes in the node group.",
	}, []string{"node_group"})
	nodeGroupMaxCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_group_max_count",
		Help: "Maximum number of nodes in the node group.",
	}, []string{"node_group"})
	nodeGroupTargetCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "node_group_target_count",
		Help: "Target number of nodes in the node group by CA.",
	}, []string{"node_group"})

	// DigitalOcean API metrics (this project's own names).
	doAPIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "digitalocean_api_requests_total",
		Help: "DigitalOcean API requests by operation and HTTP status code (\"error\" when no response was received).",
	}, []string{"operation", "code"})
	doAPIRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: caNamespace, Name: "digitalocean_api_request_duration_seconds",
		Help: "Duration of DigitalOcean API requests, per attempt.",
		// 10 ms .. ~41 s: covers a fast GET and a request that hits the client timeout.
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 13),
	}, []string{"operation"})
	doAPIRateLimitRemaining = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "digitalocean_api_rate_limit_remaining",
		Help: "Requests left in the current DigitalOcean API rate-limit window (RateLimit-Remaining header).",
	})
	doAPIRateLimitLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "digitalocean_api_rate_limit_limit",
		Help: "Size of the DigitalOcean API rate-limit window (RateLimit-Limit header).",
	})
	doNodePoolsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "digitalocean_node_pools_refused_total",
		Help: "DigitalOcean node pools refused as node groups, counted when a refusal starts or changes, by reason: bounds (min_nodes/max_nodes/count or tags), ids (path characters in an ID or name), template (template values).",
	}, []string{"reason"})
	doAPIRateLimitReset = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "digitalocean_api_rate_limit_reset_timestamp_seconds",
		Help: "Unix time at which the DigitalOcean API rate-limit window resets (RateLimit-Reset header).",
	})
)

// perNodeGroupEnabled records whether RegisterAll was asked for the per node
// group gauges, so that UpdateNodeGroupMetrics does not grow label sets nobody
// will ever scrape.
var perNodeGroupEnabled atomic.Bool

func baseCollectors() []prometheus.Collector {
	return append([]prometheus.Collector{
		clusterSafeToAutoscale, nodesCount, nodeGroupsCount, unschedulablePodsCount,
		maxNodesCount, clusterCPUCurrentCores, cpuLimitsCores, clusterMemoryCurrentBytes,
		memoryLimitsBytes, lastActivity, functionDuration, functionDurationSummary,
		scaledUpNodes, failedScaleUps, scaledDownNodes, evictedPods, errorsCount,
		unneededNodesCount, scaleDownInCooldown, skippedScaleEvents,
		failedNodeCreations, oldUnregisteredNodesRemoved,
		doAPIRequests, doAPIRequestDuration, doAPIRateLimitRemaining, doAPIRateLimitLimit,
		doAPIRateLimitReset, doNodePoolsRefused,
	}, upstreamOnlyCollectors()...)
}

// collectorsFor lists what RegisterAll registers.
func collectorsFor(emitPerNodeGroupMetrics bool) []prometheus.Collector {
	cs := baseCollectors()
	cs = append(cs, consolidationCollectors()...)
	cs = append(cs, moneyCollectors()...)
	cs = append(cs, shadowCollectors()...)
	if emitPerNodeGroupMetrics {
		cs = append(cs, perNodeGroupCollectors()...)
	}
	return cs
}

func perNodeGroupCollectors() []prometheus.Collector {
	return []prometheus.Collector{nodeGroupMinCount, nodeGroupMaxCount, nodeGroupTargetCount,
		nodeGroupHealthiness, nodeGroupBackoffStatus.vec}
}

// RegisterAll registers the autoscaler's collectors into reg. The per node
// group gauges are added only when emitPerNodeGroupMetrics is set. Calling it
// again with the same registry is harmless.
func RegisterAll(reg prometheus.Registerer, emitPerNodeGroupMetrics bool) {
	if emitPerNodeGroupMetrics {
		perNodeGroupEnabled.Store(true)
	}
	for _, c := range collectorsFor(emitPerNodeGroupMetrics) {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				continue
			}
			klog.ErrorS(err, "Failed to register metric collector")
		}
	}
	preCreate()
	preCreateConsolidation()
	nodeGroupsCount.WithLabelValues("autoprovisioned").Set(0)
	klog.V(1).InfoS("Registered cluster_autoscaler metrics", "perNodeGroupMetrics", emitPerNodeGroupMetrics)
}

// UpdateDurationFromStart records the time since start for the labelled step.
func UpdateDurationFromStart(label FunctionLabel, start time.Time) {
	UpdateDuration(label, time.Since(start))
}

// UpdateDuration records a measured duration for the labelled step.
func UpdateDuration(label FunctionLabel, d time.Duration) {
	// A step slower than a scan interval is worth a log line: it delays every
	// later decision.
	if d > 10*time.Second {
		klog.V(4).InfoS("Function took long to complete", "function", label, "duration", d)
	}
	functionDuration.WithLabelValues(string(label)).Observe(d.Seconds())
	functionDurationSummary.WithLabelValues(string(label)).Observe(d.Seconds())
}

// UpdateLastTime records when activity last ran, as unix seconds.
func UpdateLastTime(activity string, now time.Time) {
	lastActivity.WithLabelValues(activity).Set(float64(now.Unix()))
}

// UpdateClusterSafeToAutoscale sets cluster_safe_to_autoscale to 1 or 0.
func UpdateClusterSafeToAutoscale(safe bool) {
	clusterSafeToAutoscale.Set(boolToFloat(safe))
}

// UpdateNodesCount sets nodes_count for every node state.
func UpdateNodesCount(ready, unready, notStarted, longUnregistered, unregistered int) {
	nodesCount.WithLabelValues("ready").Set(float64(ready))
	nodesCount.WithLabelValues("unready").Set(float64(unready))
	nodesCount.WithLabelValues("notStarted").Set(float64(notStarted))
	nodesCount.WithLabelValues("longUnregistered").Set(float64(longUnregistered))
	nodesCount.WithLabelValues("unregistered").Set(float64(unregistered))
	// DOKS has no suspended (stopped but kept) nodes; exported for
	// upstream's dashboards.
	nodesCount.WithLabelValues("suspended").Set(0)
}

// UpdateNodeGroupsCount sets node_groups_count: the autoscaled groups that
// existed before and those node autoprovisioning created.
func UpdateNodeGroupsCount(autoscaled, autoprovisioned int) {
	nodeGroupsCount.WithLabelValues("autoscaled").Set(float64(autoscaled))
	nodeGroupsCount.WithLabelValues("autoprovisioned").Set(float64(autoprovisioned))
}

// UpdateUnschedulablePodsCount sets unschedulable_pods_count for both types.
func UpdateUnschedulablePodsCount(unschedulable, schedulerUnprocessed int) {
	unschedulablePodsCount.WithLabelValues("unschedulable").Set(float64(unschedulable))
	unschedulablePodsCount.WithLabelValues("scheduler_unprocessed").Set(float64(schedulerUnprocessed))
}

// UpdateMaxNodesCount sets max_nodes_count.
func UpdateMaxNodesCount(n int) {
	maxNodesCount.Set(float64(n))
}

// UpdateClusterCPUCurrentCores sets cluster_cpu_current_cores.
func UpdateClusterCPUCurrentCores(cores int64) {
	clusterCPUCurrentCores.Set(float64(cores))
}

// UpdateClusterMemoryCurrentBytes sets cluster_memory_current_bytes.
func UpdateClusterMemoryCurrentBytes(b int64) {
	clusterMemoryCurrentBytes.Set(float64(b))
}

// UpdateCPULimitsCores sets cpu_limits_cores{direction=minimum|maximum}.
func UpdateCPULimitsCores(minCores, maxCores int64) {
	cpuLimitsCores.WithLabelValues("minimum").Set(float64(minCores))
	cpuLimitsCores.WithLabelValues("maximum").Set(float64(maxCores))
}

// UpdateMemoryLimitsBytes sets memory_limits_bytes{direction=minimum|maximum}.
func UpdateMemoryLimitsBytes(minBytes, maxBytes int64) {
	memoryLimitsBytes.WithLabelValues("minimum").Set(float64(minBytes))
	memoryLimitsBytes.WithLabelValues("maximum").Set(float64(maxBytes))
}

// UpdateDRATemplateMismatches sets dra_node_template_resources_mismatch
// from this loop's comparison of templates with ready nodes: counts by
// driver and mismatch type (Missing, Extra, Mismatch). Pairs not counted
// any more are dropped.
func UpdateDRATemplateMismatches(counts map[[2]string]int) {
	draNodeTemplateResourcesMismatch.Reset()
	for k, n := range counts {
		draNodeTemplateResourcesMismatch.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}

// noDRADrivers is the dra_drivers label of a node without ResourceSlices.
const noDRADrivers = ""

// RegisterScaleUp counts nodes added by a scale-up. draDrivers is the
// template's dra_drivers label (dra.DriversLabel).
func RegisterScaleUp(nodes int, gpuResourceName, gpuType, draDrivers string) {
	scaledUpNodes.WithLabelValues(gpuResourceName, gpuType, draDrivers).Add(float64(nodes))
	if gpuType != "" {
		gpuScaledUpNodes.WithLabelValues(gpuResourceName, gpuType).Add(float64(nodes))
	}
}

// RegisterFailedScaleUp counts a failed scale-up by reason, with the
// failed group's GPU and dra_drivers labels, as RegisterScaleUp.
func RegisterFailedScaleUp(reason string, gpuResourceName, gpuType, draDrivers string) {
	failedScaleUps.WithLabelValues(reason, gpuResourceName, gpuType, draDrivers).Inc()
	if gpuType != "" {
		gpuFailedScaleUps.WithLabelValues(reason, gpuResourceName, gpuType).Inc()
	}
}

// RegisterScaleDown counts nodes removed by reason. draDrivers is the
// node's dra_drivers label (dra.DriversLabel).
func RegisterScaleDown(nodes int, reason string, gpuResourceName, gpuType, draDrivers string) {
	scaledDownNodes.WithLabelValues(reason, gpuResourceName, gpuType, draDrivers).Add(float64(nodes))
	if gpuType != "" {
		gpuScaledDownNodes.WithLabelValues(reason, gpuResourceName, gpuType).Add(float64(nodes))
	}
}

// RegisterEvictions counts n pod evictions that succeeded or failed.
func RegisterEvictions(n int, succeeded bool) {
	result := "failed"
	if succeeded {
		result = "succeeded"
	}
	evictedPods.WithLabelValues(result).Add(float64(n))
}

// RegisterError counts a failed loop by error type.
func RegisterError(errType string) {
	errorsCount.WithLabelValues(errType).Inc()
}

// UpdateUnneededNodesCount sets unneeded_nodes_count.
func UpdateUnneededNodesCount(n int) {
	unneededNodesCount.Set(float64(n))
}

// UpdateScaleDownInCooldown sets scale_down_in_cooldown to 1 or 0.
func UpdateScaleDownInCooldown(b bool) {
	scaleDownInCooldown.Set(boolToFloat(b))
}

// RegisterSkippedScaleUp counts a scale-up skipped because of a cluster limit.
func RegisterSkippedScaleUp(reason string) {
	skippedScaleEvents.WithLabelValues("up", reason).Inc()
}

// RegisterSkippedScaleDown counts a scale-down skipped because of a cluster limit.
func RegisterSkippedScaleDown(reason string) {
	skippedScaleEvents.WithLabelValues("down", reason).Inc()
}

// UpdateNodeGroupMetrics sets the per node group gauges; a no-op unless
// RegisterAll was called with emitPerNodeGroupMetrics.
func UpdateNodeGroupMetrics(nodeGroup string, minSize, maxSize, target int) {
	if !perNodeGroupEnabled.Load() {
		return
	}
	nodeGroupMinCount.WithLabelValues(nodeGroup).Set(float64(minSize))
	nodeGroupMaxCount.WithLabelValues(nodeGroup).Set(float64(maxSize))
	nodeGroupTargetCount.WithLabelValues(nodeGroup).Set(float64(target))
}

// DeleteNodeGroupMetrics drops the per node group series of a group that no
// longer exists (e.g. a pool whose autoscaling was turned off), so dashboards
// do not show it frozen at its last values.
func DeleteNodeGroupMetrics(nodeGroup string) {
	nodeGroupMinCount.DeleteLabelValues(nodeGroup)
	nodeGroupMaxCount.DeleteLabelValues(nodeGroup)
	nodeGroupTargetCount.DeleteLabelValues(nodeGroup)
	deleteNodeGroupHealth(nodeGroup)
}

func boolToFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
