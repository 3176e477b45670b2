package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	cliflag "k8s.io/component-base/cli/flag"
)

// Flags binds every command-line flag to an AutoscalingOptions. Names and
// defaults are upstream's; the few flags of our own are marked in their help.
type Flags struct {
	// maxEmptyBulkDelete is the deprecated alias of --max-scale-down-parallelism.
	maxEmptyBulkDelete int
	warnings           []string
	fs                 *pflag.FlagSet
	opts               AutoscalingOptions
	logging            *Logging

	startupTaints, ignoreTaints, statusTaints multiString
	startupTaintPrefixes                      multiString
	balancingIgnoreLabels, balancingLabels    multiString

	coresTotal      string
	memoryTotal     string
	expander        string
	estimator       string
	leaderElectLock string

	consolidationMaxDisrupted string
	consolidationWindows      multiString
}

// NewFlags registers the autoscaler's flags, upstream's logging flags and
// every other flag upstream's binary defines on fs, with upstream's defaults.
// Like upstream, "_" and "-" separate words interchangeably in flag names.
func NewFlags(fs *pflag.FlagSet) *Flags {
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	f := &Flags{fs: fs, opts: Defaults()}
	o := &f.opts
	d := Defaults()
	ng := &o.NodeGroupDefaults

	fs.StringVar(&o.CloudProviderName, "cloud-provider", d.CloudProviderName, "Cloud provider type.")
	fs.StringVar(&o.CloudConfig, "cloud-config", "", "Path to the cloud provider configuration file (DigitalOcean: JSON with cluster_id, token or token_file, url).")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig file; empty means in-cluster configuration.")
	fs.StringVar(&o.KubernetesURL, "kubernetes", "", "Kubernetes API server URL, overriding the one in the kubeconfig.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", d.KubeAPIContentType, "Content type of requests sent to the API server.")
	fs.StringVar(&o.Namespace, "namespace", d.Namespace, "Namespace of the status ConfigMap, the priority expander ConfigMap and the leader election Lease.")
	fs.StringVar(&o.Address, "address", d.Address, "Address to serve /metrics and /health-check on.")
	fs.Float64Var(&o.KubeClientQPS, "kube-client-qps", d.KubeClientQPS, "QPS of the Kubernetes client; events (as upstream) and the status ConfigMap go through clients of their own, with client-go's default limits.")
	fs.IntVar(&o.KubeClientBurst, "kube-client-burst", d.KubeClientBurst, "Burst of the Kubernetes client.")

	fs.DurationVar(&o.ScanInterval, "scan-interval", d.ScanInterval, "How often the cluster is re-evaluated for scale up or down.")
	fs.BoolVar(&o.FrequentLoopsEnabled, "frequent-loops-enabled", d.FrequentLoopsEnabled, "Start an iteration when new unschedulable pods appear, not only every scan-interval.")
	fs.DurationVar(&o.TriggerIdleWindow, "pending-pods-batch-idle", d.TriggerIdleWindow, "(not in upstream) After a new unschedulable pod, wait until no new one appeared for this long before starting an iteration.")
	fs.DurationVar(&o.TriggerMaxWindow, "pending-pods-batch-max", d.TriggerMaxWindow, "(not in upstream) Longest wait from the first new unschedulable pod to the iteration it triggers, however fast new ones keep coming: a stream of pending pods gets its first decision this soon.")
	fs.DurationVar(&o.MaxInactivityTime, "max-inactivity", d.MaxInactivityTime, "Maximum time since the last recorded activity before /health-check fails.")
	fs.DurationVar(&o.MaxFailingTime, "max-failing-time", d.MaxFailingTime, "Maximum time since the last successful iteration before /health-check fails.")
	fs.DurationVar(&o.MaxStartupTime, "max-startup-time", d.MaxStartupTime, "Upstream's limit on the time to the first successful iteration; not enforced here: /health-check answers 200 until the loop starts, then judges by --max-inactivity and --max-failing-time.")

	fs.StringVar(&f.expander, "expander", strings.Join(d.ExpanderNames, ","), "Comma-separated list of expanders applied in order: random, most-pods, least-waste, price, priority.")
	fs.StringVar(&f.estimator, "estimator", "binpacking", "Estimator used for scale-up. Only binpacking is available.")
	fs.IntVar(&o.MaxNodesTotal, "max-nodes-total", d.MaxNodesTotal, "Maximum number of nodes in all node groups; 0 means no limit.")
	fs.StringVar(&f.coresTotal, "cores-total", fmt.Sprintf("%d:%d", d.MinCoresTotal, d.MaxCoresTotal), "Minimum and maximum number of cores in the cluster, as <min>:<max>.")
	fs.StringVar(&f.memoryTotal, "memory-total", fmt.Sprintf("%d:%d", d.MinMemoryTotal/GiB, d.MaxMemoryTotal/GiB), "Minimum and maximum GiB of memory in the cluster, as <min>:<max>.")
	fs.Float64Var(&o.MaxHourlyCost, "max-hourly-cost", d.MaxHourlyCost, "(not in upstream) Most the autoscaled node groups' nodes may cost an hour together, in USD, at the Sizes API's prices or the cloud config's price_overrides; every phase that buys checks it (docs/limits.md). 0 means no limit.")
	fs.DurationVar(&o.UnavailableSizeTTL, "unavailable-size-ttl", d.UnavailableSizeTTL, "(not in upstream) How long a droplet size that DigitalOcean refused for capacity in the cluster's region, or whose nodes did not register within --max-node-provision-time (or the size's max_node_provision_time_by_size in the cloud config), is not asked for again; pools on demand and consolidation take the next cheapest allowed size meanwhile (docs/limits.md).")
	fs.IntVar(&o.MaxNodesPerScaleUp, "max-nodes-per-scaleup", d.MaxNodesPerScaleUp, "Maximum number of nodes added in one scale-up.")
	fs.DurationVar(&o.NewPodScaleUpDelay, "new-pod-scale-up-delay", d.NewPodScaleUpDelay, "Pods younger than this are not considered for scale-up.")
	fs.BoolVar(&o.BalanceSimilarNodeGroups, "balance-similar-node-groups", d.BalanceSimilarNodeGroups, "Split scale-ups across node groups with the same node shape.")
	fs.BoolVar(&o.NodeAutoprovisioningEnabled, "node-autoprovisioning-enabled", d.NodeAutoprovisioningEnabled, "Create DOKS node pools of the sizes the cloud config's autoprovisioning section allows when no pool fits pending pods, and delete them when empty.")
	fs.IntVar(&o.MaxAutoprovisionedNodeGroupCount, "max-autoprovisioned-node-group-count", d.MaxAutoprovisionedNodeGroupCount, "Maximum number of node pools the autoscaler has created that exist at once.")
	fs.BoolVar(&o.Consolidation.Enabled, "consolidation-enabled", d.Consolidation.Enabled, "(not in upstream) Replace nodes by cheaper ones, or pack their pods onto others, when the simulation says every pod fits and the saving passes --consolidation-savings-threshold (docs/consolidation.md). Applies to the node pools the autoscaler created and to pools tagged k8s-cluster-autoscaler-consolidate.")
	fs.Float64Var(&o.Consolidation.SavingsThreshold, "consolidation-savings-threshold", d.Consolidation.SavingsThreshold, "(not in upstream) Least saving a consolidation must make, as a fraction of the hourly price of the nodes it removes.")
	fs.DurationVar(&o.Consolidation.StabilizationWindow, "consolidation-stabilization-window", d.Consolidation.StabilizationWindow, "(not in upstream) How long a consolidation must be proposed unchanged, with no scale-up, before it acts; it is simulated again just before. Also how long a plan that found nothing is not made again while the cluster is unchanged.")
	fs.StringVar(&f.consolidationMaxDisrupted, "consolidation-max-disrupted-nodes", d.Consolidation.MaxDisrupted.String(), "(not in upstream) Most nodes under consolidation at once: N, or N% of the consolidatable node groups' nodes (rounded up).")
	fs.Var(&f.consolidationWindows, "consolidation-windows", "(not in upstream) When consolidation may start, as \"<minute> <hour> <day of month> <month> <day of week>=<duration>\" in UTC, e.g. \"0 22 * * *=8h\"; repeat the flag for several windows. None: at any time.")
	fs.DurationVar(&o.Consolidation.SavingHorizon, "consolidation-saving-horizon", d.Consolidation.SavingHorizon, "(not in upstream) Longest time a consolidation's hourly saving is counted over when it is weighed against the disruption it causes; the shorter mean interval between this cluster's recent scale-ups is used when known. A command acts only when its saving over the horizon exceeds that cost.")
	fs.Float64Var(&o.Consolidation.EvictionCost, "consolidation-eviction-cost", d.Consolidation.EvictionCost, "(not in upstream) Cost in USD counted for each pod a consolidation evicts, on top of its restart (its share of its node's price over 30 s).")
	fs.DurationVar(&o.Consolidation.WorkloadCooldown, "consolidation-workload-cooldown", d.Consolidation.WorkloadCooldown, "(not in upstream) A workload's pods (by controller; a ReplicaSet's by its Deployment) are moved by consolidation at most once within this time, nor within it after scale-down evicted one; 0 turns the rule off.")
	fs.BoolVar(&o.ScaleUpFromZero, "scale-up-from-zero", d.ScaleUpFromZero, "Scale up even when the cluster has no ready nodes.")
	fs.BoolVar(&o.CapacityBufferControllerEnabled, "capacity-buffer-controller-enabled", d.CapacityBufferControllerEnabled, "Run the CapacityBuffer controller: resolve each buffer's pod template and replicas into its status.")
	fs.BoolVar(&o.CapacityBufferPodInjectionEnabled, "capacity-buffer-pod-injection-enabled", d.CapacityBufferPodInjectionEnabled, "Add the replicas of each CapacityBuffer ready for provisioning as fake pending pods to scale-up, so their room is provisioned and kept. No pod is created.")
	fs.BoolVar(&o.CapacityBufferPodDryRunEnabled, "capacity-buffer-pod-dry-run-enabled", d.CapacityBufferPodDryRunEnabled, "Pass each buffer's pod template through the API server's defaulting and admission webhooks with a dry-run pod create (needs create on pods; no pod is created), so fake pods take the room real ones would. No-op without --capacity-buffer-controller-enabled.")
	fs.BoolVar(&o.EnforceNodeGroupMinSize, "enforce-node-group-min-size", d.EnforceNodeGroupMinSize, "Scale a node group up to its minimum size when it is below it.")
	fs.DurationVar(&o.InitialNodeGroupBackoffDuration, "initial-node-group-backoff-duration", d.InitialNodeGroupBackoffDuration, "First backoff of a node group after a failed scale-up.")
	fs.DurationVar(&o.MaxNodeGroupBackoffDuration, "max-node-group-backoff-duration", d.MaxNodeGroupBackoffDuration, "Longest backoff of a node group after repeated failed scale-ups.")
	fs.DurationVar(&o.NodeGroupBackoffResetTimeout, "node-group-backoff-reset-timeout", d.NodeGroupBackoffResetTimeout, "Time without failures after which a node group's backoff starts again from the initial duration.")
	fs.Var(&f.startupTaints, "startup-taint", "Taint key a node carries only while it starts (e.g. an agent removes it once the node is usable): left out of templates, and a node holding one is not ready yet. Repeat the flag for several; keys with the prefix startup-taint.cluster-autoscaler.kubernetes.io/ need no flag.")
	fs.Var(&f.ignoreTaints, "ignore-taint", "Deprecated: the same as --startup-taint (keys with the prefix ignore-taint.cluster-autoscaler.kubernetes.io/ need no flag).")
	fs.Var(&f.statusTaints, "status-taint", "Taint key that reports a condition of a ready node: left out of templates, the node stays ready. Repeat the flag for several; keys with the prefix status-taint.cluster-autoscaler.kubernetes.io/ need no flag.")
	fs.Var(&f.startupTaintPrefixes, "startup-taint-prefix", "Taint key prefix that marks startup taints, in addition to startup-taint.cluster-autoscaler.kubernetes.io/.")
	fs.StringVar(&o.GPULabel, "gpu-label", d.GPULabel, "(not in upstream) Node label that marks GPU nodes; empty uses the provider's (DigitalOcean: doks.digitalocean.com/gpu-brand).")
	fs.Var(&f.balancingIgnoreLabels, "balancing-ignore-label", "Label ignored, besides the built-in ones, when comparing node groups for --balance-similar-node-groups.")
	fs.Var(&f.balancingLabels, "balancing-label", "Label compared, instead of the built-in heuristics, when comparing node groups for --balance-similar-node-groups.")
	fs.Float64Var(&o.MaxCapacityMemoryDifferenceRatio, "memory-difference-ratio", d.MaxCapacityMemoryDifferenceRatio, "Largest memory capacity difference between similar node groups, as a ratio of the smaller.")
	fs.Float64Var(&o.MaxFreeDifferenceRatio, "max-free-difference-ratio", d.MaxFreeDifferenceRatio, "Largest free resource difference between similar node groups, as a ratio of the smaller.")
	fs.Float64Var(&o.MaxAllocatableDifferenceRatio, "max-allocatable-difference-ratio", d.MaxAllocatableDifferenceRatio, "Largest allocatable resource difference between similar node groups, as a ratio of the smaller.")
	fs.BoolVar(&o.ParallelScaleUp, "parallel-scale-up", d.ParallelScaleUp, "Scale up several node groups in parallel.")
	fs.DurationVar(&o.MaxBinpackingTime, "max-binpacking-time", d.MaxBinpackingTime, "Longest time spent estimating one scale-up.")
	fs.DurationVar(&o.MaxNodeGroupBinpackingDuration, "max-nodegroup-binpacking-duration", d.MaxNodeGroupBinpackingDuration, "Longest time spent estimating one node group.")
	fs.BoolVar(&o.FastpathBinpackingEnabled, "fastpath-binpacking-enabled", d.FastpathBinpackingEnabled, "Use upstream's fast-path binpacking.")
	fs.BoolVar(&o.ProactiveScaleupEnabled, "enable-proactive-scaleup", d.ProactiveScaleupEnabled, "Scale up for pods of controllers before they are created.")
	fs.IntVar(&o.PodInjectionLimit, "pod-injection-limit", d.PodInjectionLimit, "Most fake pods injected for proactive scale-up.")
	fs.BoolVar(&o.ForceDaemonSets, "force-ds", d.ForceDaemonSets, "Block scale-up of node groups too small for all their DaemonSet pods.")
	fs.BoolVar(&o.ScaleFromUnschedulable, "scale-from-unschedulable", d.ScaleFromUnschedulable, "Ignore a node's spec.unschedulable in node templates.")
	fs.BoolVar(&o.SalvoScaleUp, "salvo-scale-up", d.SalvoScaleUp, "Upstream's salvo scale-up.")
	fs.DurationVar(&o.SalvoScaleUpBudget, "salvo-scale-up-budget", d.SalvoScaleUpBudget, "Time budget of a salvo scale-up.")
	fs.BoolVar(&o.ScaleUpSimulationForSkippedNodeGroupsEnabled, "scaleup-simulation-for-skipped-node-groups-enabled", d.ScaleUpSimulationForSkippedNodeGroupsEnabled, "Simulate scale-up for node groups skipped (e.g. in backoff).")
	fs.BoolVar(&o.CapacityQuotasEnabled, "capacity-quotas-enabled", d.CapacityQuotasEnabled, "Honour capacity quota objects.")
	fs.DurationVar(&o.NodeInfoCacheExpireTime, "node-info-cache-expire-time", d.NodeInfoCacheExpireTime, "Expiry of cached node templates.")
	fs.StringSliceVar(&o.AllowedSchedulerNames, "allowed-scheduler-names", nil, "Schedulers whose pods may cause scale-ups, besides the default one.")
	fs.StringSliceVar(&o.BypassedSchedulers, "bypassed-scheduler-names", nil, "Schedulers whose unscheduled pods cause scale-ups without waiting for the scheduler's verdict.")
	fs.StringVar(&o.SchedulerConfigFile, "scheduler-config-file", "", "KubeSchedulerConfiguration file (one profile): the simulation runs the Filter plugins it enables, with its plugin arguments, as the cluster's scheduler does.")
	fs.IntVar(&o.PredicateParallelism, "predicate-parallelism", d.PredicateParallelism, "Parallelism of the scheduler predicate checks.")
	fs.IntVar(&o.ClusterSnapshotParallelism, "cluster-snapshot-parallelism", d.ClusterSnapshotParallelism, "Parallelism of the cluster snapshot creation.")
	fs.BoolVar(&o.CSINodeAwareSchedulingEnabled, "enable-csi-node-aware-scheduling", d.CSINodeAwareSchedulingEnabled, "Simulate CSINode objects.")

	fs.BoolVar(&o.ScaleDownEnabled, "scale-down-enabled", d.ScaleDownEnabled, "Whether to remove unneeded nodes.")
	fs.DurationVar(&o.ScaleDownDelayAfterAdd, "scale-down-delay-after-add", d.ScaleDownDelayAfterAdd, "How long after a scale-up scale-down evaluation resumes.")
	fs.DurationVar(&o.ScaleDownDelayAfterDelete, "scale-down-delay-after-delete", d.ScaleDownDelayAfterDelete, "How long after a node deletion starts scale-down evaluation resumes.")
	fs.DurationVar(&o.ScaleDownDelayAfterFailure, "scale-down-delay-after-failure", d.ScaleDownDelayAfterFailure, "How long after a failed scale-down evaluation resumes.")
	fs.BoolVar(&o.ScaleDownDelayTypeLocal, "scale-down-delay-type-local", d.ScaleDownDelayTypeLocal, "Apply the --scale-down-delay-after-* delays per node group instead of cluster-wide.")
	fs.DurationVar(&ng.ScaleDownUnneededTime, "scale-down-unneeded-time", d.NodeGroupDefaults.ScaleDownUnneededTime, "How long a node must be unneeded before it is removed. When not given, the DOKS cluster's scale_down_unneeded_time applies if it sets one.")
	fs.DurationVar(&ng.ScaleDownUnreadyTime, "scale-down-unready-time", d.NodeGroupDefaults.ScaleDownUnreadyTime, "How long an unready node must be unneeded before it is removed.")
	fs.BoolVar(&o.ScaleDownUnreadyEnabled, "scale-down-unready-enabled", d.ScaleDownUnreadyEnabled, "Whether unready nodes may be removed.")
	fs.Float64Var(&ng.ScaleDownUtilizationThreshold, "scale-down-utilization-threshold", d.NodeGroupDefaults.ScaleDownUtilizationThreshold, "Node utilization (max of cpu and memory requests over allocatable) below which a node may be removed. When not given, the DOKS cluster's scale_down_utilization_threshold applies if it sets one.")
	fs.Float64Var(&ng.ScaleDownGpuUtilizationThreshold, "scale-down-gpu-utilization-threshold", d.NodeGroupDefaults.ScaleDownGpuUtilizationThreshold, "GPU utilization below which a GPU node may be removed.")
	fs.IntVar(&o.ScaleDownNonEmptyCandidatesCount, "scale-down-non-empty-candidates-count", d.ScaleDownNonEmptyCandidatesCount, "Maximum number of non-empty nodes newly found unneeded in one iteration (nodes already unneeded are always checked again); 0 or less means no limit.")
	fs.Float64Var(&o.ScaleDownCandidatesPoolRatio, "scale-down-candidates-pool-ratio", d.ScaleDownCandidatesPoolRatio, "Share of the cluster's nodes that one iteration simulates as new non-empty scale-down candidates; 1.0 simulates them all.")
	fs.IntVar(&o.ScaleDownCandidatesPoolMinCount, "scale-down-candidates-pool-min-count", d.ScaleDownCandidatesPoolMinCount, "Minimum number of new non-empty scale-down candidates simulated in one iteration: the pool is max(nodes × --scale-down-candidates-pool-ratio, this).")
	fs.DurationVar(&o.ScaleDownSimulationTimeout, "scale-down-simulation-timeout", d.ScaleDownSimulationTimeout, "Longest time one iteration spends simulating new scale-down candidates.")
	fs.IntVar(&f.maxEmptyBulkDelete, "max-empty-bulk-delete", d.MaxScaleDownParallelism, "Deprecated (not an upstream 1.36 flag): sets --max-scale-down-parallelism when that is not given.")
	fs.IntVar(&o.MaxScaleDownParallelism, "max-scale-down-parallelism", d.MaxScaleDownParallelism, "Maximum number of nodes (empty or drained) being removed at once.")
	fs.IntVar(&o.MaxDrainParallelism, "max-drain-parallelism", d.MaxDrainParallelism, "Maximum number of non-empty nodes being drained and removed at once.")
	fs.IntVar(&o.MaxGracefulTerminationSec, "max-graceful-termination-sec", d.MaxGracefulTerminationSec, "Longest grace period given to a pod evicted for scale-down, in seconds.")
	fs.StringVar(&o.DrainPriorityConfig, "drain-priority-config", "", "Comma-separated priority:terminationGracePeriodSeconds pairs: evict pods in priority groups, lowest first.")
	fs.DurationVar(&o.MaxPodEvictionTime, "max-pod-eviction-time", d.MaxPodEvictionTime, "Give up evicting a pod after this long.")
	fs.BoolVar(&o.CordonNodeBeforeTerminate, "cordon-node-before-terminating", d.CordonNodeBeforeTerminate, "Cordon a node before draining and deleting it.")
	fs.BoolVar(&o.DaemonSetEvictionForEmptyNodes, "daemonset-eviction-for-empty-nodes", d.DaemonSetEvictionForEmptyNodes, "Evict DaemonSet pods from empty nodes before deleting them.")
	fs.BoolVar(&o.DaemonSetEvictionForOccupiedNodes, "daemonset-eviction-for-occupied-nodes", d.DaemonSetEvictionForOccupiedNodes, "Evict DaemonSet pods from non-empty nodes before deleting them.")
	fs.BoolVar(&o.SkipNodesWithLocalStorage, "skip-nodes-with-local-storage", d.SkipNodesWithLocalStorage, "Never remove nodes running pods with local storage (emptyDir, hostPath).")
	fs.BoolVar(&o.SkipNodesWithSystemPods, "skip-nodes-with-system-pods", d.SkipNodesWithSystemPods, "Keep nodes running kube-system pods (DaemonSet and mirror pods aside) without a PodDisruptionBudget, until those pods are older than --blocking-system-pod-distruption-timeout.")
	fs.DurationVar(&o.BspDisruptionTimeout, "blocking-system-pod-distruption-timeout", d.BspDisruptionTimeout, "How long a kube-system pod without a PodDisruptionBudget keeps its node (with --skip-nodes-with-system-pods); once the pod is older, it is evicted like any other.")
	fs.BoolVar(&o.SkipNodesWithCustomControllerPods, "skip-nodes-with-custom-controller-pods", d.SkipNodesWithCustomControllerPods, "Never remove nodes running pods owned by controllers other than the built-in ones.")
	fs.IntVar(&o.MinReplicaCount, "min-replica-count", d.MinReplicaCount, "Minimum number of replicas a replicated pod's controller must have for the pod to be moved.")
	fs.BoolVar(&o.IgnoreDaemonSetsUtilization, "ignore-daemonsets-utilization", d.IgnoreDaemonSetsUtilization, "Leave DaemonSet pods out of a node's utilization.")
	fs.BoolVar(&o.IgnoreMirrorPodsUtilization, "ignore-mirror-pods-utilization", d.IgnoreMirrorPodsUtilization, "Leave mirror (static) pods out of a node's utilization.")
	fs.IntVar(&o.ExpendablePodsPriorityCutoff, "expendable-pods-priority-cutoff", d.ExpendablePodsPriorityCutoff, "Pods with priority below this neither trigger scale-up nor keep a node.")
	fs.DurationVar(&ng.MaxNodeProvisionTime, "max-node-provision-time", d.NodeGroupDefaults.MaxNodeProvisionTime, "How long a requested node may take to register before the scale-up is given up.")
	fs.DurationVar(&o.MaxNodeStartupTime, "max-node-startup-time", d.MaxNodeStartupTime, "How long a registered node may take to become ready.")
	fs.Float64Var(&o.MaxTotalUnreadyPercentage, "max-total-unready-percentage", d.MaxTotalUnreadyPercentage, "Percentage of unready nodes above which the autoscaler stops acting.")
	fs.IntVar(&o.OkTotalUnreadyCount, "ok-total-unready-count", d.OkTotalUnreadyCount, "Number of unready nodes tolerated whatever the percentage.")
	fs.DurationVar(&o.UnremovableNodeRecheckTimeout, "unremovable-node-recheck-timeout", d.UnremovableNodeRecheckTimeout, "How long before a node found unremovable is checked again.")
	fs.DurationVar(&o.NodeDeletionDelayTimeout, "node-deletion-delay-timeout", d.NodeDeletionDelayTimeout, "Longest wait for delay-deletion.cluster-autoscaler.kubernetes.io/ annotations to go before a node is deleted.")
	fs.DurationVar(&o.NodeDeleteDelayAfterTaint, "node-delete-delay-after-taint", d.NodeDeleteDelayAfterTaint, "Wait between tainting a node and deleting it.")
	fs.BoolVar(&o.DynamicNodeDeleteDelayAfterTaintEnabled, "dynamic-node-delete-delay-after-taint-enabled", d.DynamicNodeDeleteDelayAfterTaintEnabled, "Adjust --node-delete-delay-after-taint to the API server's latency.")
	fs.DurationVar(&o.NodeDeletionBatcherInterval, "node-deletion-batcher-interval", d.NodeDeletionBatcherInterval, "How long node deletions are gathered into one batch.")
	fs.DurationVar(&o.NodeDeletionCandidateTTL, "node-deletion-candidate-ttl", d.NodeDeletionCandidateTTL, "How long a node marked removable stays marked.")
	fs.IntVar(&o.MaxBulkSoftTaintCount, "max-bulk-soft-taint-count", d.MaxBulkSoftTaintCount, "Most nodes tainted or untainted PreferNoSchedule at once; 0 turns soft tainting off.")
	fs.DurationVar(&o.MaxBulkSoftTaintTime, "max-bulk-soft-taint-time", d.MaxBulkSoftTaintTime, "Longest time spent soft-tainting nodes at once.")
	fs.BoolVar(&o.PodDeletionCostOnUnneededNodes, "pod-deletion-cost-on-unneeded-nodes", d.PodDeletionCostOnUnneededNodes, "(not in upstream) Annotate the ReplicaSet pods of unneeded nodes with controller.kubernetes.io/pod-deletion-cost=-100 (pods that have a deletion cost of their own are left alone), so that a Deployment scaling in deletes them first and the node empties without evictions; the annotation is taken off when the node is needed again. With --consolidation-enabled, the pods of the command it holds get it too, and while the requests fall a ready command waits for the scale-in until the saving forgone reaches its evictions' cost. Within --max-bulk-soft-taint-count and --max-bulk-soft-taint-time a loop. Needs patch on pods (docs/node-removal.md).")
	fs.BoolVar(&o.ForceDeleteLongUnregisteredNodes, "force-delete-unregistered-nodes", d.ForceDeleteLongUnregisteredNodes, "Delete long-unregistered nodes even below the node group's minimum size.")
	fs.BoolVar(&o.DynamicResourceAllocationEnabled, "enable-dynamic-resource-allocation", d.DynamicResourceAllocationEnabled, "Handle DRA (Dynamic Resource Allocation) objects, locked to true.")
	fs.BoolVar(&o.ForceDeleteFailedNodes, "force-delete-failed-nodes", d.ForceDeleteFailedNodes, "Delete failed nodes even below the node group's minimum size.")
	fs.BoolVar(&o.MaxNodeSkipEvalTimeTrackerEnabled, "max-node-skip-eval-time-tracker-enabled", d.MaxNodeSkipEvalTimeTrackerEnabled, "Export max_node_skip_eval_duration_seconds.")
	fs.BoolVar(&o.NodeRemovalLatencyTrackingEnabled, "node-removal-latency-tracking-enabled", d.NodeRemovalLatencyTrackingEnabled, "Export node_removal_latency_seconds.")

	fs.BoolVar(&o.ProvisioningRequestsEnabled, "enable-provisioning-requests", d.ProvisioningRequestsEnabled, "Whether the clusterautoscaler will be handling the ProvisioningRequest CRs.")
	fs.DurationVar(&o.ProvisioningRequestInitialBackoffTime, "provisioning-request-initial-backoff-time", d.ProvisioningRequestInitialBackoffTime, "Initial backoff time for ProvisioningRequest retry after failed ScaleUp.")
	fs.DurationVar(&o.ProvisioningRequestMaxBackoffTime, "provisioning-request-max-backoff-time", d.ProvisioningRequestMaxBackoffTime, "Max backoff time for ProvisioningRequest retry after failed ScaleUp.")
	fs.IntVar(&o.ProvisioningRequestMaxBackoffCacheSize, "provisioning-request-max-backoff-cache-size", d.ProvisioningRequestMaxBackoffCacheSize, "Max size for ProvisioningRequest cache size used for retry backoff mechanism.")
	fs.BoolVar(&o.CheckCapacityBatchProcessing, "check-capacity-batch-processing", d.CheckCapacityBatchProcessing, "Whether to enable batch processing for check capacity requests.")
	fs.IntVar(&o.CheckCapacityProvisioningRequestMaxBatchSize, "check-capacity-provisioning-request-max-batch-size", d.CheckCapacityProvisioningRequestMaxBatchSize, "Maximum number of provisioning requests to process in a single batch.")
	fs.DurationVar(&o.CheckCapacityProvisioningRequestBatchTimebox, "check-capacity-provisioning-request-batch-timebox", d.CheckCapacityProvisioningRequestBatchTimebox, "Maximum time to process a batch of provisioning requests.")
	fs.StringVar(&o.CheckCapacityProcessorInstance, "check-capacity-processor-instance", d.CheckCapacityProcessorInstance, "Name of the processor instance. Only ProvisioningRequests that define this name in their parameters with the key \"processorInstance\" will be processed by this CA instance. It only refers to check capacity ProvisioningRequests, but if not empty, best-effort atomic ProvisioningRequests processing is disabled in this instance.")

	fs.BoolVar(&o.WriteStatusConfigMap, "write-status-configmap", d.WriteStatusConfigMap, "Write the status ConfigMap.")
	fs.StringVar(&o.StatusConfigMapName, "status-config-map-name", d.StatusConfigMapName, "Name of the status ConfigMap.")
	fs.BoolVar(&o.Shadow, "shadow", d.Shadow, "(not in upstream) Shadow mode: decide and record every scale-up, scale-down and consolidation as usual (events with the message prefixed [shadow], the status ConfigMap, metrics), but change nothing: no DigitalOcean write is sent, and Kubernetes writes to nodes and pods (taints, evictions) go with dryRun=All. Leases, Events and the status ConfigMap are still written (docs/shadow-mode.md).")
	fs.BoolVar(&o.EmitPerNodeGroupMetrics, "emit-per-nodegroup-metrics", d.EmitPerNodeGroupMetrics, "Export min, max and target size gauges per node group.")
	fs.BoolVar(&o.RecordDuplicatedEvents, "record-duplicated-events", d.RecordDuplicatedEvents, "Record similar events again within 5 minutes instead of aggregating them.")
	fs.BoolVar(&o.DebuggingSnapshotEnabled, "debugging-snapshot-enabled", d.DebuggingSnapshotEnabled, "Serve upstream's debugging snapshot on /snapshotz.")

	fs.BoolVar(&o.LeaderElect, "leader-elect", d.LeaderElect, "Run only while holding the leader election Lease.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", d.LeaderElectLeaseDuration, "How long non-leaders wait before taking over an unrenewed lease.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", d.LeaderElectRenewDeadline, "How long the leader keeps trying to renew before giving up leadership.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", d.LeaderElectRetryPeriod, "Time between attempts to acquire or renew the lease.")
	fs.StringVar(&o.LeaderElectResourceName, "leader-elect-resource-name", d.LeaderElectResourceName, "Name of the leader election Lease, in --namespace.")
	fs.StringVar(&o.LeaderElectResourceNamespace, "leader-elect-resource-namespace", "", "Accepted and unused, as in upstream: the Lease lives in --namespace.")
	fs.StringVar(&f.leaderElectLock, "leader-elect-resource-lock", "leases", "Leader election lock type. Only leases is available.")
	fs.BoolVar(&o.Profiling, "profiling", d.Profiling, "Serve /debug/pprof on --address.")

	f.logging = addLoggingFlags(fs)
	addRefusedFlags(fs)
	return f
}

// Parse parses the command line and converts it to options. Every problem of
// the command line is reported at once, each naming its flag: values that do
// not parse, upstream flags this build refuses, and values out of range.
// It returns pflag.ErrHelp for --help.
func (f *Flags) Parse(args []string) (AutoscalingOptions, error) {
	var problems []error
	// Setting each value here rather than in pflag keeps parsing after a bad
	// value, so one start reports every bad flag.
	err := f.fs.ParseAll(args, func(fl *pflag.Flag, value string) error {
		old := fl.Value.String()
		if err := f.fs.Set(fl.Name, value); err != nil {
			// pflag may leave a zero behind (a bad duration sets 0s):
			// restore the previous value so that only this error is told.
			if _, isSlice := fl.Value.(pflag.SliceValue); !isSlice {
				_ = fl.Value.Set(old)
			}
			problems = append(problems, fmt.Errorf("--%s=%s: %v", fl.Name, value, unwrapSetError(err)))
		}
		return nil
	})
	if errors.Is(err, pflag.ErrHelp) {
		return f.opts, err
	}
	if err != nil {
		problems = append(problems, err)
	}
	if f.fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q: every option is a --flag (a bool flag takes its value as --flag=false)", f.fs.Args()))
	}
	problems = append(problems, refusals(f.fs)...)
	o, convErrs := f.options()
	problems = append(problems, convErrs...)
	if len(problems) > 0 {
		return o, FlagErrors(problems)
	}
	return o, nil
}

// Logging is the logging configuration of the parsed flags, applied by
// ApplyLogging.
func (f *Flags) Logging() *Logging { return f.logging }

// FlagErrors lists every problem of one command line.
type FlagErrors []error

func (e FlagErrors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// unwrapSetError drops pflag's `invalid argument "x" for "--f" flag:` prefix:
// Parse prints the flag and value itself.
func unwrapSetError(err error) string {
	s := err.Error()
	if i := strings.Index(s, " flag: "); i >= 0 && strings.HasPrefix(s, "invalid argument") {
		return s[i+len(" flag: "):]
	}
	return s
}

// options converts the parsed flags, collecting every value that makes no
// sense, each naming its flag.
func (f *Flags) options() (AutoscalingOptions, []error) {
	o := f.opts
	var errs []error
	o.FlagsGiven = map[string]bool{}
	f.fs.Visit(func(fl *pflag.Flag) { o.FlagsGiven[fl.Name] = true })
	var err error
	if o.MinCoresTotal, o.MaxCoresTotal, err = parseMinMax(f.coresTotal); err != nil {
		errs = append(errs, fmt.Errorf("--cores-total: %v", err))
	}
	minMem, maxMem, err := parseMinMax(f.memoryTotal)
	if err != nil {
		errs = append(errs, fmt.Errorf("--memory-total: %v", err))
	}
	o.MinMemoryTotal, o.MaxMemoryTotal = minMem*GiB, maxMem*GiB
	if o.ExpanderNames, err = parseExpanders(f.expander); err != nil {
		errs = append(errs, fmt.Errorf("--expander: %v", err))
	}
	if f.estimator != "binpacking" {
		errs = append(errs, fmt.Errorf("--estimator: %q is not available; only binpacking is", f.estimator))
	}
	for _, l := range []struct {
		flag string
		keys multiString
	}{{"startup-taint", f.startupTaints}, {"ignore-taint", f.ignoreTaints}, {"status-taint", f.statusTaints}} {
		for _, k := range l.keys {
			if errs2 := validation.IsQualifiedName(k); len(errs2) > 0 {
				errs = append(errs, fmt.Errorf("--%s: %q is not a taint key: %s", l.flag, k, strings.Join(errs2, "; ")))
			}
		}
	}
	o.StartupTaints = slices.Concat(f.startupTaints, f.ignoreTaints)
	o.StatusTaints = slices.Clone(f.statusTaints)
	o.StartupTaintPrefixes = slices.Clone(f.startupTaintPrefixes)
	o.BalancingExtraIgnoredLabels = slices.Clone(f.balancingIgnoreLabels)
	o.BalancingLabels = slices.Clone(f.balancingLabels)
	if f.leaderElectLock != "leases" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock: %q is not available; only leases is", f.leaderElectLock))
	}
	if o.FlagsGiven["drain-priority-config"] {
		if o.DrainPriorities, err = ParseDrainPriorityConfig(o.DrainPriorityConfig); err != nil {
			errs = append(errs, fmt.Errorf("--drain-priority-config: %v", err))
		}
		if o.FlagsGiven["max-graceful-termination-sec"] {
			errs = append(errs, fmt.Errorf("--drain-priority-config cannot be used together with --max-graceful-termination-sec (as upstream): each priority has its own grace period"))
		}
	}
	errs = append(errs, f.consolidationOptions(&o)...)
	f.applyDeprecatedAliases(&o)
	errs = append(errs, validate(o)...)
	return o, errs
}

// Warnings are the notices about the flags given (deprecated ones), for the
// start-up log; call after Parse.
func (f *Flags) Warnings() []string { return f.warnings }

// applyDeprecatedAliases maps deprecated flags onto their replacements.
// --max-empty-bulk-delete is not an upstream 1.36 flag; manifests written for
// older releases keep working, with a warning.
func (f *Flags) applyDeprecatedAliases(o *AutoscalingOptions) {
	f.warnings = nil
	if !o.FlagsGiven["max-empty-bulk-delete"] {
		return
	}
	if o.FlagsGiven["max-scale-down-parallelism"] {
		f.warnings = append(f.warnings, fmt.Sprintf("--max-empty-bulk-delete is deprecated and ignored: --max-scale-down-parallelism=%d is given", o.MaxScaleDownParallelism))
		return
	}
	o.MaxScaleDownParallelism = f.maxEmptyBulkDelete
	f.warnings = append(f.warnings, fmt.Sprintf("--max-empty-bulk-delete is deprecated: use --max-scale-down-parallelism (now %d)", f.maxEmptyBulkDelete))
}

// maxParallelismFlag names the flag that set MaxScaleDownParallelism, for
// errors.
func maxParallelismFlag(o AutoscalingOptions) string {
	if o.FlagsGiven["max-empty-bulk-delete"] && !o.FlagsGiven["max-scale-down-parallelism"] {
		return "max-empty-bulk-delete"
	}
	return "max-scale-down-parallelism"
}

func validate(o AutoscalingOptions) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	positive := []struct {
		flag string
		d    time.Duration
	}{
		{"scan-interval", o.ScanInterval},
		{"max-node-provision-time", o.NodeGroupDefaults.MaxNodeProvisionTime},
		{"max-inactivity", o.MaxInactivityTime},
		{"max-failing-time", o.MaxFailingTime},
		{"pending-pods-batch-idle", o.TriggerIdleWindow},
		{"pending-pods-batch-max", o.TriggerMaxWindow},
		{"initial-node-group-backoff-duration", o.InitialNodeGroupBackoffDuration},
		{"max-node-group-backoff-duration", o.MaxNodeGroupBackoffDuration},
		{"leader-elect-lease-duration", o.LeaderElectLeaseDuration},
		{"leader-elect-renew-deadline", o.LeaderElectRenewDeadline},
		{"leader-elect-retry-period", o.LeaderElectRetryPeriod},
		{"scale-down-simulation-timeout", o.ScaleDownSimulationTimeout},
	}
	for _, p := range positive {
		if p.d <= 0 {
			fail("--%s must be positive, got %v", p.flag, p.d)
		}
	}
	nonNegative := []struct {
		flag string
		d    time.Duration
	}{
		{"new-pod-scale-up-delay", o.NewPodScaleUpDelay},
		{"scale-down-delay-after-add", o.ScaleDownDelayAfterAdd},
		{"scale-down-delay-after-delete", o.ScaleDownDelayAfterDelete},
		{"scale-down-delay-after-failure", o.ScaleDownDelayAfterFailure},
		{"scale-down-unneeded-time", o.NodeGroupDefaults.ScaleDownUnneededTime},
		{"scale-down-unready-time", o.NodeGroupDefaults.ScaleDownUnreadyTime},
		{"max-pod-eviction-time", o.MaxPodEvictionTime},
		{"unavailable-size-ttl", o.UnavailableSizeTTL},
		{"max-startup-time", o.MaxStartupTime},
		{"blocking-system-pod-distruption-timeout", o.BspDisruptionTimeout},
	}
	for _, p := range nonNegative {
		if p.d < 0 {
			fail("--%s must not be negative, got %v", p.flag, p.d)
		}
	}
	ints := []struct {
		flag string
		v    int
		min  int
	}{
		{"max-nodes-total", o.MaxNodesTotal, 0},
		{"max-nodes-per-scaleup", o.MaxNodesPerScaleUp, 1},
		{"max-autoprovisioned-node-group-count", o.MaxAutoprovisionedNodeGroupCount, 0},
		{maxParallelismFlag(o), o.MaxScaleDownParallelism, 1},
		{"max-drain-parallelism", o.MaxDrainParallelism, 0},
		{"scale-down-candidates-pool-min-count", o.ScaleDownCandidatesPoolMinCount, 0},
		{"max-graceful-termination-sec", o.MaxGracefulTerminationSec, 0},
		{"min-replica-count", o.MinReplicaCount, 0},
		{"ok-total-unready-count", o.OkTotalUnreadyCount, 0},
		{"kube-client-burst", o.KubeClientBurst, 1},
	}
	for _, i := range ints {
		if i.v < i.min {
			fail("--%s must be at least %d, got %d", i.flag, i.min, i.v)
		}
	}
	if o.MaxHourlyCost < 0 || math.IsNaN(o.MaxHourlyCost) || math.IsInf(o.MaxHourlyCost, 0) {
		fail("--max-hourly-cost must be a non-negative number of USD an hour, got %v", o.MaxHourlyCost)
	}
	for _, t := range []struct {
		flag string
		v    float64
	}{
		{"scale-down-utilization-threshold", o.NodeGroupDefaults.ScaleDownUtilizationThreshold},
		{"scale-down-gpu-utilization-threshold", o.NodeGroupDefaults.ScaleDownGpuUtilizationThreshold},
		{"scale-down-candidates-pool-ratio", o.ScaleDownCandidatesPoolRatio},
	} {
		if t.v < 0 || t.v > 1 {
			fail("--%s must be between 0 and 1, got %v", t.flag, t.v)
		}
	}
	// Upstream's words: since 1.35 the flag exists only to be true.
	if !o.DynamicResourceAllocationEnabled {
		fail("--enable-dynamic-resource-allocation flag must be true: %t", o.DynamicResourceAllocationEnabled)
	}
	if o.MaxTotalUnreadyPercentage < 0 || o.MaxTotalUnreadyPercentage > 100 {
		fail("--max-total-unready-percentage must be between 0 and 100, got %v", o.MaxTotalUnreadyPercentage)
	}
	if o.KubeClientQPS <= 0 {
		fail("--kube-client-qps must be positive, got %v", o.KubeClientQPS)
	}
	switch o.KubeAPIContentType {
	case "application/vnd.kubernetes.protobuf", "application/json":
	default:
		fail("--kube-api-content-type must be application/vnd.kubernetes.protobuf or application/json, got %q", o.KubeAPIContentType)
	}
	if o.TriggerIdleWindow > o.TriggerMaxWindow {
		fail("--pending-pods-batch-idle (%v) must not exceed --pending-pods-batch-max (%v)", o.TriggerIdleWindow, o.TriggerMaxWindow)
	}
	if o.LeaderElectRenewDeadline >= o.LeaderElectLeaseDuration {
		fail("--leader-elect-renew-deadline (%v) must be shorter than --leader-elect-lease-duration (%v)", o.LeaderElectRenewDeadline, o.LeaderElectLeaseDuration)
	}
	// client-go's leader election panics otherwise: the retries, with their
	// jitter (its JitterFactor, 1.2), must fit in the renew deadline.
	const leaderElectionJitter = 1.2
	if float64(o.LeaderElectRenewDeadline) <= leaderElectionJitter*float64(o.LeaderElectRetryPeriod) {
		fail("--leader-elect-renew-deadline (%v) must be longer than %.1f × --leader-elect-retry-period (%v)",
			o.LeaderElectRenewDeadline, leaderElectionJitter, o.LeaderElectRetryPeriod)
	}
	if o.Namespace == "" {
		fail("--namespace must not be empty")
	}
	if o.WriteStatusConfigMap && o.StatusConfigMapName == "" {
		fail("--status-config-map-name must not be empty when --write-status-configmap is true")
	}
	if o.CloudConfig == "" {
		fail("--cloud-config is required: the path of the provider's configuration file")
	}
	return errs
}

func parseMinMax(s string) (int64, int64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 {
		return 0, 0, fmt.Errorf("want <min>:<max>, got %q", s)
	}
	lo, err := strconv.ParseInt(strings.TrimSpace(parts[0]), 10, 64)
	if err != nil || lo < 0 {
		return 0, 0, fmt.Errorf("min %q is not a non-negative integer", parts[0])
	}
	hi, err := strconv.ParseInt(strings.TrimSpace(parts[1]), 10, 64)
	if err != nil || hi < 0 {
		return 0, 0, fmt.Errorf("max %q is not a non-negative integer", parts[1])
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("min %d is greater than max %d", lo, hi)
	}
	return lo, hi, nil
}

// Expander names accepted by --expander.
var expanderNames = []string{"random", "most-pods", "least-waste", "price", "priority"}

func parseExpanders(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "grpc" {
			return nil, fmt.Errorf("the grpc expander is not supported by this build")
		}
		known := false
		for _, k := range expanderNames {
			known = known || k == name
		}
		if !known {
			return nil, fmt.Errorf("unknown expander %q (available: %s)", name, strings.Join(expanderNames, ", "))
		}
		if seen[name] {
			return nil, fmt.Errorf("expander %q listed twice", name)
		}
		seen[name] = true
		out = append(out, name)
	}
	return out, nil
}

// multiString is a repeatable flag: each occurrence adds one value. It
// prints as upstream's MultiStringFlag does ("[a b]").
type multiString []string

func (l *multiString) String() string { return "[" + strings.Join(*l, " ") + "]" }

func (l *multiString) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func (l *multiString) Type() string { return "MultiStringFlag" }

// consolidationOptions converts the consolidation flags, each error naming
// its flag.
func (f *Flags) consolidationOptions(o *AutoscalingOptions) []error {
	var errs []error
	c := &o.Consolidation
	b, err := ParseDisruptionBudget(f.consolidationMaxDisrupted)
	if err != nil {
		errs = append(errs, fmt.Errorf("--consolidation-max-disrupted-nodes: %v", err))
	}
	c.MaxDisrupted = b
	c.Windows = nil
	for _, s := range f.consolidationWindows {
		w, err := ParseWindow(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--consolidation-windows: %v", err))
			continue
		}
		c.Windows = append(c.Windows, w)
	}
	if c.SavingsThreshold < 0 || c.SavingsThreshold >= 1 {
		errs = append(errs, fmt.Errorf("--consolidation-savings-threshold must be at least 0 and below 1, got %v", c.SavingsThreshold))
	}
	if c.StabilizationWindow < 0 {
		errs = append(errs, fmt.Errorf("--consolidation-stabilization-window must not be negative, got %v", c.StabilizationWindow))
	}
	if c.SavingHorizon <= 0 {
		errs = append(errs, fmt.Errorf("--consolidation-saving-horizon must be positive, got %v", c.SavingHorizon))
	}
	if c.EvictionCost < 0 {
		errs = append(errs, fmt.Errorf("--consolidation-eviction-cost must not be negative, got %v", c.EvictionCost))
	}
	if c.WorkloadCooldown < 0 {
		errs = append(errs, fmt.Errorf("--consolidation-workload-cooldown must not be negative, got %v", c.WorkloadCooldown))
	}
	return errs
}
