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

	ScanInterval         time.Duration
	FrequentLoopsEnabled bool
	TriggerIdleWindow    time.Duration // quiet time after the last new pending pod
	TriggerMaxWindow     time.Duration // longest a trigger waits from the first new pod
	MaxInactivityTime    time.Duration
	MaxFailingTime       time.Duration

	ExpanderNames                   []string
	MaxNodesTotal                   int
	MinCoresTotal                   int64
	MaxCoresTotal                   int64
	MinMemoryTotal                  int64 // bytes
	MaxMemoryTotal                  int64 // bytes
	MaxNodesPerScaleUp              int
	NewPodScaleUpDelay              time.Duration
	BalanceSimilarNodeGroups        bool
	ScaleUpFromZero                 bool
	InitialNodeGroupBackoffDuration time.Duration
	MaxNodeGroupBackoffDuration     time.Duration
	NodeGroupBackoffResetTimeout    time.Duration
	GPULabel                        string
	// StartupTaints are taint keys a node carries only while it starts
	// (--startup-taint, and the deprecated --ignore-taint); StatusTaints
	// report a condition on a ready node (--status-taint). Both are left out
	// of templates; see clusterstate.TaintConfig.
	StartupTaints []string
	StatusTaints  []string

	ScaleDownEnabled                  bool
	ScaleDownDelayAfterAdd            time.Duration
	ScaleDownDelayAfterDelete         time.Duration
	ScaleDownDelayAfterFailure        time.Duration
	ScaleDownUnreadyEnabled           bool
	ScaleDownNonEmptyCandidatesCount  int
	MaxEmptyBulkDelete                int
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

	WriteStatusConfigMap    bool
	StatusConfigMapName     string
	EmitPerNodeGroupMetrics bool

	LeaderElect              bool
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration
	LeaderElectResourceName  string

	Profiling bool
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
		CloudProviderName:                 "digitalocean",
		Namespace:                         "kube-system",
		Address:                           ":8085",
		KubeClientQPS:                     5,
		KubeClientBurst:                   10,
		ScanInterval:                      10 * time.Second,
		FrequentLoopsEnabled:              true,
		TriggerIdleWindow:                 time.Second,
		TriggerMaxWindow:                  10 * time.Second,
		MaxInactivityTime:                 10 * time.Minute,
		MaxFailingTime:                    15 * time.Minute,
		ExpanderNames:                     []string{"least-waste"},
		MaxNodesTotal:                     0,
		MinCoresTotal:                     0,
		MaxCoresTotal:                     320000,
		MinMemoryTotal:                    0,
		MaxMemoryTotal:                    6400000 * GiB,
		MaxNodesPerScaleUp:                1000,
		ScaleUpFromZero:                   true,
		InitialNodeGroupBackoffDuration:   5 * time.Minute,
		MaxNodeGroupBackoffDuration:       30 * time.Minute,
		NodeGroupBackoffResetTimeout:      3 * time.Hour,
		ScaleDownEnabled:                  true,
		ScaleDownDelayAfterAdd:            10 * time.Minute,
		ScaleDownDelayAfterDelete:         0,
		ScaleDownDelayAfterFailure:        3 * time.Minute,
		ScaleDownUnreadyEnabled:           true,
		ScaleDownNonEmptyCandidatesCount:  30,
		MaxEmptyBulkDelete:                10,
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
