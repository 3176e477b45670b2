// Package config holds the autoscaler's options and their command-line flags.
// Flag names and defaults follow upstream cluster-autoscaler so that users
// moving from it keep their manifests.
package config

import "time"

// NodeGroupAutoscalingOptions are the options a node group may override.
type NodeGroupAutoscalingOptions struct {
	// ScaleDownUtilizationThreshold: a node whose cpu and memory request
	// ratios are both below it is a scale-down candidate.
	ScaleDownUtilizationThreshold float64
	// ScaleDownGpuUtilizationThreshold is the same for GPU nodes, by GPU.
	ScaleDownGpuUtilizationThreshold float64
	// ScaleDownUnneededTime is how long a node must be unneeded before it goes.
	ScaleDownUnneededTime time.Duration
	// ScaleDownUnreadyTime is the same for unready nodes.
	ScaleDownUnreadyTime time.Duration
	// MaxNodeProvisionTime is how long a requested node may take to register.
	MaxNodeProvisionTime time.Duration
	// Consolidate: with --consolidation-enabled, the group's nodes may be
	// replaced by cheaper ones or packed onto others (the provider says
	// which groups: DigitalOcean, the pools it created and the pools
	// tagged k8s-cluster-autoscaler-consolidate).
	Consolidate bool
}

// AutoscalingOptions are all the options of one autoscaler process.
type AutoscalingOptions struct {
	NodeGroupDefaults NodeGroupAutoscalingOptions
	// FlagsGiven names the flags set on the command line, so a provider can
	// tell an operator's explicit choice from a default it may replace with
	// the cloud's own setting.
	FlagsGiven map[string]bool

	CloudProviderName string
	CloudConfig       string
	Kubeconfig        string
	KubernetesURL     string
	Namespace         string
	Address           string
	KubeClientQPS     float64
	KubeClientBurst   int
	// KubeAPIContentType is the content type of requests to the API server.
	KubeAPIContentType string

	ScanInterval         time.Duration
	FrequentLoopsEnabled bool
	TriggerIdleWindow    time.Duration // quiet time after the last new pending pod
	TriggerMaxWindow     time.Duration // longest a trigger waits from the first new pod
	MaxInactivityTime    time.Duration
	MaxFailingTime       time.Duration
	// MaxStartupTime bounds the wait for the first successful iteration
	// in the health check.
	MaxStartupTime time.Duration

	ExpanderNames  []string
	MaxNodesTotal  int
	MinCoresTotal  int64
	MaxCoresTotal  int64
	MinMemoryTotal int64 // bytes
	MaxMemoryTotal int64 // bytes
	// MaxHourlyCost bounds what the autoscaled groups' nodes cost an hour,
	// in USD (--max-hourly-cost); 0 means no limit.
	MaxHourlyCost float64
	// UnavailableSizeTTL is how long a droplet size refused for capacity in
	// the region, or whose nodes did not come, is not asked for again
	// (--unavailable-size-ttl).
	UnavailableSizeTTL       time.Duration
	MaxNodesPerScaleUp       int
	NewPodScaleUpDelay       time.Duration
	BalanceSimilarNodeGroups bool
	ScaleUpFromZero          bool
	// NodeAutoprovisioningEnabled lets scale-up create node groups (DOKS
	// pools) of the sizes the cloud config allows, and delete them when
	// empty; MaxAutoprovisionedNodeGroupCount bounds how many exist at once.
	NodeAutoprovisioningEnabled      bool
	MaxAutoprovisionedNodeGroupCount int
	InitialNodeGroupBackoffDuration  time.Duration
	MaxNodeGroupBackoffDuration      time.Duration
	NodeGroupBackoffResetTimeout     time.Duration
	GPULabel                         string
	// StartupTaints are taint keys a node carries only while it starts
	// (--startup-taint, and the deprecated --ignore-taint); StatusTaints
	// report a condition on a ready node (--status-taint). Both are left out
	// of templates; see clusterstate.TaintConfig.
	StartupTaints []string
	StatusTaints  []string
	// StartupTaintPrefixes are extra key prefixes marking startup taints
	// (--startup-taint-prefix).
	StartupTaintPrefixes    []string
	EnforceNodeGroupMinSize bool

	// CapacityBuffers (docs/capacity-buffers.md): the controller resolving
	// buffers into their status, the injection of their fake pods into
	// scale-up, and the dry run that passes their template through the API
	// server's defaulting and webhooks.
	CapacityBufferControllerEnabled   bool
	CapacityBufferPodInjectionEnabled bool
	CapacityBufferPodDryRunEnabled    bool

	// ProvisioningRequests (--enable-provisioning-requests and the
	// --provisioning-request-* / --check-capacity-* flags).
	ProvisioningRequestsEnabled                  bool
	ProvisioningRequestInitialBackoffTime        time.Duration
	ProvisioningRequestMaxBackoffTime            time.Duration
	ProvisioningRequestMaxBackoffCacheSize       int
	CheckCapacityBatchProcessing                 bool
	CheckCapacityProvisioningRequestMaxBatchSize int
	CheckCapacityProvisioningRequestBatchTimebox time.Duration
	CheckCapacityProcessorInstance               string

	// Similar node groups (--balance-similar-node-groups).
	BalancingExtraIgnoredLabels      []string
	BalancingLabels                  []string
	MaxCapacityMemoryDifferenceRatio float64
	MaxFreeDifferenceRatio           float64
	MaxAllocatableDifferenceRatio    float64

	// Upstream flags defined for compatibility; docs/flags.md
	// says which values each accepts.
	ParallelScaleUp                              bool
	MaxBinpackingTime                            time.Duration
	MaxNodeGroupBinpackingDuration               time.Duration
	FastpathBinpackingEnabled                    bool
	ProactiveScaleupEnabled                      bool
	PodInjectionLimit                            int
	ForceDaemonSets                              bool
	ScaleFromUnschedulable                       bool
	SalvoScaleUp                                 bool
	SalvoScaleUpBudget                           time.Duration
	ScaleUpSimulationForSkippedNodeGroupsEnabled bool
	CapacityQuotasEnabled                        bool
	NodeInfoCacheExpireTime                      time.Duration
	AllowedSchedulerNames                        []string
	BypassedSchedulers                           []string
	SchedulerConfigFile                          string
	PredicateParallelism                         int
	ClusterSnapshotParallelism                   int
	CSINodeAwareSchedulingEnabled                bool

	ScaleDownEnabled           bool
	ScaleDownDelayAfterAdd     time.Duration
	ScaleDownDelayAfterDelete  time.Duration
	ScaleDownDelayAfterFailure time.Duration
	ScaleDownUnreadyEnabled    bool
	// ScaleDownNonEmptyCandidatesCount: new non-empty nodes found unneeded
	// per loop, at most; 0 or less means no limit (upstream's meaning).
	ScaleDownNonEmptyCandidatesCount int
	ScaleDownDelayTypeLocal          bool
	// ScaleDownCandidatesPoolRatio and ScaleDownCandidatesPoolMinCount size
	// the pool of non-empty nodes not yet unneeded that one loop simulates:
	// max(nodes × ratio, min count). Nodes already unneeded are always
	// checked again. ScaleDownSimulationTimeout bounds the time one loop
	// spends simulating new candidates.
	ScaleDownCandidatesPoolRatio    float64
	ScaleDownCandidatesPoolMinCount int
	ScaleDownSimulationTimeout      time.Duration
	// MaxScaleDownParallelism: nodes (empty or drained) in removal at once;
	// MaxDrainParallelism: of those, nodes being drained. The deprecated
	// --max-empty-bulk-delete sets the first when it is not given.
	MaxScaleDownParallelism int
	MaxDrainParallelism     int
	DrainPriorityConfig     string
	// DrainPriorities is DrainPriorityConfig parsed (nil when not given).
	DrainPriorities                   []DrainPriority
	CordonNodeBeforeTerminate         bool
	DaemonSetEvictionForEmptyNodes    bool
	DaemonSetEvictionForOccupiedNodes bool
	// BspDisruptionTimeout: after it, kube-system pods without a PDB no
	// longer block scale-down (--blocking-system-pod-distruption-timeout).
	BspDisruptionTimeout                    time.Duration
	IgnoreMirrorPodsUtilization             bool
	MaxNodeStartupTime                      time.Duration
	UnremovableNodeRecheckTimeout           time.Duration
	NodeDeletionDelayTimeout                time.Duration
	NodeDeleteDelayAfterTaint               time.Duration
	DynamicNodeDeleteDelayAfterTaintEnabled bool
	NodeDeletionBatcherInterval             time.Duration
	NodeDeletionCandidateTTL                time.Duration
	MaxBulkSoftTaintCount                   int
	MaxBulkSoftTaintTime                    time.Duration
	// PodDeletionCostOnUnneededNodes (not in upstream) gives the ReplicaSet
	// pods of unneeded nodes a negative pod-deletion-cost, so that a
	// Deployment scaling in deletes them first and the node empties
	// without evictions (docs/node-removal.md).
	PodDeletionCostOnUnneededNodes   bool
	ForceDeleteLongUnregisteredNodes bool
	ForceDeleteFailedNodes           bool
	// DynamicResourceAllocationEnabled is locked to true, as upstream locks
	// it since 1.35: claims, slices and device classes are always simulated.
	DynamicResourceAllocationEnabled  bool
	MaxNodeSkipEvalTimeTrackerEnabled bool
	NodeRemovalLatencyTrackingEnabled bool
	MaxGracefulTerminationSec         int
	MaxPodEvictionTime                time.Duration
	SkipNodesWithLocalStorage         bool
	SkipNodesWithSystemPods           bool
	SkipNodesWithCustomControllerPods bool
	MinReplicaCount                   int
	IgnoreDaemonSetsUtilization       bool
	ExpendablePodsPriorityCutoff      int

	MaxTotalUnreadyPercentage float64
	OkTotalUnreadyCount       int

	WriteStatusConfigMap     bool
	StatusConfigMapName      string
	EmitPerNodeGroupMetrics  bool
	RecordDuplicatedEvents   bool
	DebuggingSnapshotEnabled bool

	// Shadow (--shadow, this project's own): decide and record, change
	// nothing (docs/shadow-mode.md).
	Shadow bool

	LeaderElect              bool
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration
	LeaderElectResourceName  string
	// LeaderElectResourceNamespace is accepted and unused, as upstream.
	LeaderElectResourceNamespace string

	Profiling bool

	// Consolidation (this project's own; docs/consolidation.md).
	Consolidation ConsolidationOptions
}

// Defaults returns the options a process gets with no flags set.
func Defaults() AutoscalingOptions {
	return AutoscalingOptions{
		NodeGroupDefaults: NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold:    0.5,
			ScaleDownGpuUtilizationThreshold: 0.5,
			ScaleDownUnneededTime:            10 * time.Minute,
			ScaleDownUnreadyTime:             20 * time.Minute,
			MaxNodeProvisionTime:             15 * time.Minute,
		},
		CloudProviderName:                            "digitalocean",
		DynamicResourceAllocationEnabled:             true,
		Namespace:                                    "kube-system",
		Address:                                      ":8085",
		KubeClientQPS:                                5,
		KubeClientBurst:                              10,
		KubeAPIContentType:                           "application/vnd.kubernetes.protobuf",
		MaxStartupTime:                               20 * time.Minute,
		MaxCapacityMemoryDifferenceRatio:             0.015,
		MaxFreeDifferenceRatio:                       0.05,
		MaxAllocatableDifferenceRatio:                0.05,
		MaxBinpackingTime:                            5 * time.Minute,
		MaxNodeGroupBinpackingDuration:               10 * time.Second,
		PodInjectionLimit:                            5000,
		SalvoScaleUpBudget:                           time.Minute,
		NodeInfoCacheExpireTime:                      87600 * time.Hour,
		PredicateParallelism:                         4,
		ClusterSnapshotParallelism:                   16,
		ScaleDownCandidatesPoolRatio:                 0.1,
		ScaleDownCandidatesPoolMinCount:              50,
		ScaleDownSimulationTimeout:                   30 * time.Second,
		MaxScaleDownParallelism:                      10,
		MaxDrainParallelism:                          1,
		CordonNodeBeforeTerminate:                    true,
		DaemonSetEvictionForOccupiedNodes:            true,
		BspDisruptionTimeout:                         time.Hour,
		MaxNodeStartupTime:                           15 * time.Minute,
		UnremovableNodeRecheckTimeout:                5 * time.Minute,
		NodeDeletionDelayTimeout:                     2 * time.Minute,
		NodeDeleteDelayAfterTaint:                    5 * time.Second,
		MaxBulkSoftTaintCount:                        10,
		MaxBulkSoftTaintTime:                         3 * time.Second,
		ScanInterval:                                 10 * time.Second,
		FrequentLoopsEnabled:                         true,
		TriggerIdleWindow:                            500 * time.Millisecond,
		TriggerMaxWindow:                             time.Second,
		MaxInactivityTime:                            10 * time.Minute,
		MaxFailingTime:                               15 * time.Minute,
		ExpanderNames:                                []string{"least-waste"},
		MaxNodesTotal:                                0,
		UnavailableSizeTTL:                           3 * time.Minute,
		MinCoresTotal:                                0,
		MaxCoresTotal:                                320000,
		MinMemoryTotal:                               0,
		MaxMemoryTotal:                               6400000 * GiB,
		MaxNodesPerScaleUp:                           1000,
		MaxAutoprovisionedNodeGroupCount:             15,
		ScaleUpFromZero:                              true,
		ProvisioningRequestInitialBackoffTime:        time.Minute,
		ProvisioningRequestMaxBackoffTime:            10 * time.Minute,
		ProvisioningRequestMaxBackoffCacheSize:       1000,
		CheckCapacityProvisioningRequestMaxBatchSize: 10,
		CheckCapacityProvisioningRequestBatchTimebox: 10 * time.Second,
		CapacityBufferPodDryRunEnabled:               true,
		InitialNodeGroupBackoffDuration:              5 * time.Minute,
		MaxNodeGroupBackoffDuration:                  30 * time.Minute,
		NodeGroupBackoffResetTimeout:                 3 * time.Hour,
		Consolidation: ConsolidationOptions{SavingsThreshold: 0.1, StabilizationWindow: 5 * time.Minute, MaxDisrupted: DisruptionBudget{Percent: 10, IsPercent: true},
			SavingHorizon: time.Hour, EvictionCost: 0.005, WorkloadCooldown: time.Hour},
		ScaleDownEnabled:                  true,
		ScaleDownDelayAfterAdd:            10 * time.Minute,
		ScaleDownDelayAfterDelete:         0,
		ScaleDownDelayAfterFailure:        3 * time.Minute,
		ScaleDownUnreadyEnabled:           true,
		ScaleDownNonEmptyCandidatesCount:  30,
		MaxGracefulTerminationSec:         600,
		MaxPodEvictionTime:                2 * time.Minute,
		SkipNodesWithLocalStorage:         true,
		SkipNodesWithSystemPods:           true,
		SkipNodesWithCustomControllerPods: true,
		MinReplicaCount:                   0,
		ExpendablePodsPriorityCutoff:      -10,
		MaxTotalUnreadyPercentage:         45,
		OkTotalUnreadyCount:               3,
		WriteStatusConfigMap:              true,
		StatusConfigMapName:               "cluster-autoscaler-status",
		LeaderElect:                       true,
		LeaderElectLeaseDuration:          15 * time.Second,
		LeaderElectRenewDeadline:          10 * time.Second,
		LeaderElectRetryPeriod:            2 * time.Second,
		LeaderElectResourceName:           "cluster-autoscaler",
	}
}

// GiB is 2^30 bytes; --memory-total is given in GiB.
const GiB = int64(1) << 30
