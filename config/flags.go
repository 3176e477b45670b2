package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Flags binds every command-line flag to an AutoscalingOptions. Names and
// defaults are upstream's; the few flags of our own are marked in their help.
type Flags struct {
	fs   *flag.FlagSet
	opts AutoscalingOptions

	startupTaints, ignoreTaints, statusTaints stringList

	coresTotal      string
	memoryTotal     string
	expander        string
	estimator       string
	leaderElectLock string
}

// NewFlags registers the autoscaler's flags on fs with their defaults.
func NewFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs, opts: Defaults()}
	o := &f.opts
	d := Defaults()
	ng := &o.NodeGroupDefaults

	fs.StringVar(&o.CloudProviderName, "cloud-provider", d.CloudProviderName, "Cloud provider type.")
	fs.StringVar(&o.CloudConfig, "cloud-config", "", "Path to the cloud provider configuration file (DigitalOcean: JSON with cluster_id, token or token_file, url).")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig file; empty means in-cluster configuration.")
	fs.StringVar(&o.KubernetesURL, "kubernetes", "", "Kubernetes API server URL, overriding the one in the kubeconfig.")
	fs.StringVar(&o.Namespace, "namespace", d.Namespace, "Namespace of the status ConfigMap, the priority expander ConfigMap and the leader election Lease.")
	fs.StringVar(&o.Address, "address", d.Address, "Address to serve /metrics and /health-check on.")
	fs.Float64Var(&o.KubeClientQPS, "kube-client-qps", d.KubeClientQPS, "QPS of the Kubernetes client.")
	fs.IntVar(&o.KubeClientBurst, "kube-client-burst", d.KubeClientBurst, "Burst of the Kubernetes client.")

	fs.DurationVar(&o.ScanInterval, "scan-interval", d.ScanInterval, "How often the cluster is re-evaluated for scale up or down.")
	fs.BoolVar(&o.FrequentLoopsEnabled, "frequent-loops-enabled", d.FrequentLoopsEnabled, "Start an iteration when new unschedulable pods appear, not only every scan-interval.")
	fs.DurationVar(&o.TriggerIdleWindow, "pending-pods-batch-idle", d.TriggerIdleWindow, "(not in upstream) After a new unschedulable pod, wait until no new one appeared for this long before starting an iteration.")
	fs.DurationVar(&o.TriggerMaxWindow, "pending-pods-batch-max", d.TriggerMaxWindow, "(not in upstream) Longest wait from the first new unschedulable pod to the iteration it triggers.")
	fs.DurationVar(&o.MaxInactivityTime, "max-inactivity", d.MaxInactivityTime, "Maximum time since the last recorded activity before /health-check fails.")
	fs.DurationVar(&o.MaxFailingTime, "max-failing-time", d.MaxFailingTime, "Maximum time since the last successful iteration before /health-check fails.")

	fs.StringVar(&f.expander, "expander", strings.Join(d.ExpanderNames, ","), "Comma-separated list of expanders applied in order: random, most-pods, least-waste, price, priority.")
	fs.StringVar(&f.estimator, "estimator", "binpacking", "Estimator used for scale-up. Only binpacking is available.")
	fs.IntVar(&o.MaxNodesTotal, "max-nodes-total", d.MaxNodesTotal, "Maximum number of nodes in all node groups; 0 means no limit.")
	fs.StringVar(&f.coresTotal, "cores-total", fmt.Sprintf("%d:%d", d.MinCoresTotal, d.MaxCoresTotal), "Minimum and maximum number of cores in the cluster, as <min>:<max>.")
	fs.StringVar(&f.memoryTotal, "memory-total", fmt.Sprintf("%d:%d", d.MinMemoryTotal/GiB, d.MaxMemoryTotal/GiB), "Minimum and maximum GiB of memory in the cluster, as <min>:<max>.")
	fs.IntVar(&o.MaxNodesPerScaleUp, "max-nodes-per-scaleup", d.MaxNodesPerScaleUp, "Maximum number of nodes added in one scale-up.")
	fs.DurationVar(&o.NewPodScaleUpDelay, "new-pod-scale-up-delay", d.NewPodScaleUpDelay, "Pods younger than this are not considered for scale-up.")
	fs.BoolVar(&o.BalanceSimilarNodeGroups, "balance-similar-node-groups", d.BalanceSimilarNodeGroups, "Split scale-ups across node groups with the same node shape.")
	fs.BoolVar(&o.ScaleUpFromZero, "scale-up-from-zero", d.ScaleUpFromZero, "Scale up even when the cluster has no ready nodes.")
	fs.DurationVar(&o.InitialNodeGroupBackoffDuration, "initial-node-group-backoff-duration", d.InitialNodeGroupBackoffDuration, "First backoff of a node group after a failed scale-up.")
	fs.DurationVar(&o.MaxNodeGroupBackoffDuration, "max-node-group-backoff-duration", d.MaxNodeGroupBackoffDuration, "Longest backoff of a node group after repeated failed scale-ups.")
	fs.DurationVar(&o.NodeGroupBackoffResetTimeout, "node-group-backoff-reset-timeout", d.NodeGroupBackoffResetTimeout, "Time without failures after which a node group's backoff starts again from the initial duration.")
	fs.Var(&f.startupTaints, "startup-taint", "Taint key a node carries only while it starts (e.g. an agent removes it once the node is usable): left out of templates, and a node holding one is not ready yet. Repeat the flag for several; keys with the prefix startup-taint.cluster-autoscaler.kubernetes.io/ need no flag.")
	fs.Var(&f.ignoreTaints, "ignore-taint", "Deprecated: the same as --startup-taint (keys with the prefix ignore-taint.cluster-autoscaler.kubernetes.io/ need no flag).")
	fs.Var(&f.statusTaints, "status-taint", "Taint key that reports a condition of a ready node: left out of templates, the node stays ready. Repeat the flag for several; keys with the prefix status-taint.cluster-autoscaler.kubernetes.io/ need no flag.")
	fs.StringVar(&o.GPULabel, "gpu-label", d.GPULabel, "(not in upstream) Node label that marks GPU nodes; empty uses the provider's (DigitalOcean: doks.digitalocean.com/gpu-brand).")

	fs.BoolVar(&o.ScaleDownEnabled, "scale-down-enabled", d.ScaleDownEnabled, "Whether to remove unneeded nodes.")
	fs.DurationVar(&o.ScaleDownDelayAfterAdd, "scale-down-delay-after-add", d.ScaleDownDelayAfterAdd, "How long after a scale-up scale-down evaluation resumes.")
	fs.DurationVar(&o.ScaleDownDelayAfterDelete, "scale-down-delay-after-delete", d.ScaleDownDelayAfterDelete, "How long after a node deletion starts scale-down evaluation resumes; 0 means one --scan-interval.")
	fs.DurationVar(&o.ScaleDownDelayAfterFailure, "scale-down-delay-after-failure", d.ScaleDownDelayAfterFailure, "How long after a failed scale-down evaluation resumes.")
	fs.DurationVar(&ng.ScaleDownUnneededTime, "scale-down-unneeded-time", d.NodeGroupDefaults.ScaleDownUnneededTime, "How long a node must be unneeded before it is removed. When not given, the DOKS cluster's scale_down_unneeded_time applies if it sets one.")
	fs.DurationVar(&ng.ScaleDownUnreadyTime, "scale-down-unready-time", d.NodeGroupDefaults.ScaleDownUnreadyTime, "How long an unready node must be unneeded before it is removed.")
	fs.BoolVar(&o.ScaleDownUnreadyEnabled, "scale-down-unready-enabled", d.ScaleDownUnreadyEnabled, "Whether unready nodes may be removed.")
	fs.Float64Var(&ng.ScaleDownUtilizationThreshold, "scale-down-utilization-threshold", d.NodeGroupDefaults.ScaleDownUtilizationThreshold, "Node utilization (max of cpu and memory requests over allocatable) below which a node may be removed. When not given, the DOKS cluster's scale_down_utilization_threshold applies if it sets one.")
	fs.Float64Var(&ng.ScaleDownGpuUtilizationThreshold, "scale-down-gpu-utilization-threshold", d.NodeGroupDefaults.ScaleDownGpuUtilizationThreshold, "GPU utilization below which a GPU node may be removed.")
	fs.IntVar(&o.ScaleDownNonEmptyCandidatesCount, "scale-down-non-empty-candidates-count", d.ScaleDownNonEmptyCandidatesCount, "Maximum number of non-empty nodes checked for removal in one iteration.")
	fs.IntVar(&o.MaxEmptyBulkDelete, "max-empty-bulk-delete", d.MaxEmptyBulkDelete, "Maximum number of empty nodes deleted at once.")
	fs.IntVar(&o.MaxGracefulTerminationSec, "max-graceful-termination-sec", d.MaxGracefulTerminationSec, "Longest grace period given to a pod evicted for scale-down, in seconds.")
	fs.DurationVar(&o.MaxPodEvictionTime, "max-pod-eviction-time", d.MaxPodEvictionTime, "Give up evicting a pod after this long.")
	fs.BoolVar(&o.SkipNodesWithLocalStorage, "skip-nodes-with-local-storage", d.SkipNodesWithLocalStorage, "Never remove nodes running pods with local storage (emptyDir, hostPath).")
	fs.BoolVar(&o.SkipNodesWithSystemPods, "skip-nodes-with-system-pods", d.SkipNodesWithSystemPods, "Never remove nodes running kube-system pods (DaemonSet and mirror pods aside) without a PodDisruptionBudget.")
	fs.BoolVar(&o.SkipNodesWithCustomControllerPods, "skip-nodes-with-custom-controller-pods", d.SkipNodesWithCustomControllerPods, "Never remove nodes running pods owned by controllers other than the built-in ones.")
	fs.IntVar(&o.MinReplicaCount, "min-replica-count", d.MinReplicaCount, "Minimum number of replicas a replicated pod's controller must have for the pod to be moved.")
	fs.BoolVar(&o.IgnoreDaemonSetsUtilization, "ignore-daemonsets-utilization", d.IgnoreDaemonSetsUtilization, "Leave DaemonSet pods out of a node's utilization.")
	fs.IntVar(&o.ExpendablePodsPriorityCutoff, "expendable-pods-priority-cutoff", d.ExpendablePodsPriorityCutoff, "Pods with priority below this neither trigger scale-up nor keep a node.")
	fs.DurationVar(&ng.MaxNodeProvisionTime, "max-node-provision-time", d.NodeGroupDefaults.MaxNodeProvisionTime, "How long a requested node may take to register before the scale-up is given up.")
	fs.Float64Var(&o.MaxTotalUnreadyPercentage, "max-total-unready-percentage", d.MaxTotalUnreadyPercentage, "Percentage of unready nodes above which the autoscaler stops acting.")
	fs.IntVar(&o.OkTotalUnreadyCount, "ok-total-unready-count", d.OkTotalUnreadyCount, "Number of unready nodes tolerated whatever the percentage.")

	fs.BoolVar(&o.WriteStatusConfigMap, "write-status-configmap", d.WriteStatusConfigMap, "Write the status ConfigMap.")
	fs.StringVar(&o.StatusConfigMapName, "status-config-map-name", d.StatusConfigMapName, "Name of the status ConfigMap.")
	fs.BoolVar(&o.EmitPerNodeGroupMetrics, "emit-per-nodegroup-metrics", d.EmitPerNodeGroupMetrics, "Export min, max and target size gauges per node group.")

	fs.BoolVar(&o.LeaderElect, "leader-elect", d.LeaderElect, "Run only while holding the leader election Lease.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", d.LeaderElectLeaseDuration, "How long non-leaders wait before taking over an unrenewed lease.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", d.LeaderElectRenewDeadline, "How long the leader keeps trying to renew before giving up leadership.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", d.LeaderElectRetryPeriod, "Time between attempts to acquire or renew the lease.")
	fs.StringVar(&o.LeaderElectResourceName, "leader-elect-resource-name", d.LeaderElectResourceName, "Name of the leader election Lease, in --namespace.")
	fs.StringVar(&f.leaderElectLock, "leader-elect-resource-lock", "leases", "Leader election lock type. Only leases is available.")
	fs.BoolVar(&o.Profiling, "profiling", d.Profiling, "Serve /debug/pprof on --address.")
	return f
}

// Options converts the parsed flags, refusing values that make no sense and
// naming the flag at fault.
func (f *Flags) Options() (AutoscalingOptions, error) {
	o := f.opts
	o.FlagsGiven = map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { o.FlagsGiven[fl.Name] = true })
	var err error
	if o.MinCoresTotal, o.MaxCoresTotal, err = parseMinMax(f.coresTotal); err != nil {
		return o, fmt.Errorf("--cores-total: %v", err)
	}
	minMem, maxMem, err := parseMinMax(f.memoryTotal)
	if err != nil {
		return o, fmt.Errorf("--memory-total: %v", err)
	}
	o.MinMemoryTotal, o.MaxMemoryTotal = minMem*GiB, maxMem*GiB
	if o.ExpanderNames, err = parseExpanders(f.expander); err != nil {
		return o, fmt.Errorf("--expander: %v", err)
	}
	if f.estimator != "binpacking" {
		return o, fmt.Errorf("--estimator: %q is not available; only binpacking is", f.estimator)
	}
	for _, l := range []struct {
		flag string
		keys stringList
	}{{"startup-taint", f.startupTaints}, {"ignore-taint", f.ignoreTaints}, {"status-taint", f.statusTaints}} {
		for _, k := range l.keys {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return o, fmt.Errorf("--%s: %q is not a taint key: %s", l.flag, k, strings.Join(errs, "; "))
			}
		}
	}
	o.StartupTaints = append(append([]string(nil), f.startupTaints...), f.ignoreTaints...)
	o.StatusTaints = append([]string(nil), f.statusTaints...)
	if f.leaderElectLock != "leases" {
		return o, fmt.Errorf("--leader-elect-resource-lock: %q is not available; only leases is", f.leaderElectLock)
	}
	if err := validate(o); err != nil {
		return o, err
	}
	return o, nil
}

func validate(o AutoscalingOptions) error {
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
	}
	for _, p := range positive {
		if p.d <= 0 {
			return fmt.Errorf("--%s must be positive, got %v", p.flag, p.d)
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
	}
	for _, p := range nonNegative {
		if p.d < 0 {
			return fmt.Errorf("--%s must not be negative, got %v", p.flag, p.d)
		}
	}
	ints := []struct {
		flag string
		v    int
		min  int
	}{
		{"max-nodes-total", o.MaxNodesTotal, 0},
		{"max-nodes-per-scaleup", o.MaxNodesPerScaleUp, 1},
		{"max-empty-bulk-delete", o.MaxEmptyBulkDelete, 1},
		{"max-graceful-termination-sec", o.MaxGracefulTerminationSec, 0},
		{"scale-down-non-empty-candidates-count", o.ScaleDownNonEmptyCandidatesCount, 0},
		{"min-replica-count", o.MinReplicaCount, 0},
		{"ok-total-unready-count", o.OkTotalUnreadyCount, 0},
		{"kube-client-burst", o.KubeClientBurst, 1},
	}
	for _, i := range ints {
		if i.v < i.min {
			return fmt.Errorf("--%s must be at least %d, got %d", i.flag, i.min, i.v)
		}
	}
	for _, t := range []struct {
		flag string
		v    float64
	}{
		{"scale-down-utilization-threshold", o.NodeGroupDefaults.ScaleDownUtilizationThreshold},
		{"scale-down-gpu-utilization-threshold", o.NodeGroupDefaults.ScaleDownGpuUtilizationThreshold},
	} {
		if t.v < 0 || t.v > 1 {
			return fmt.Errorf("--%s must be between 0 and 1, got %v", t.flag, t.v)
		}
	}
	if o.MaxTotalUnreadyPercentage < 0 || o.MaxTotalUnreadyPercentage > 100 {
		return fmt.Errorf("--max-total-unready-percentage must be between 0 and 100, got %v", o.MaxTotalUnreadyPercentage)
	}
	if o.KubeClientQPS <= 0 {
		return fmt.Errorf("--kube-client-qps must be positive, got %v", o.KubeClientQPS)
	}
	if o.TriggerIdleWindow > o.TriggerMaxWindow {
		return fmt.Errorf("--pending-pods-batch-idle (%v) must not exceed --pending-pods-batch-max (%v)", o.TriggerIdleWindow, o.TriggerMaxWindow)
	}
	if o.LeaderElectRenewDeadline >= o.LeaderElectLeaseDuration {
		return fmt.Errorf("--leader-elect-renew-deadline (%v) must be shorter than --leader-elect-lease-duration (%v)", o.LeaderElectRenewDeadline, o.LeaderElectLeaseDuration)
	}
	// client-go's leader election panics otherwise: the retries, with their
	// jitter (its JitterFactor, 1.2), must fit in the renew deadline.
	const leaderElectionJitter = 1.2
	if float64(o.LeaderElectRenewDeadline) <= leaderElectionJitter*float64(o.LeaderElectRetryPeriod) {
		return fmt.Errorf("--leader-elect-renew-deadline (%v) must be longer than %.1f × --leader-elect-retry-period (%v)",
			o.LeaderElectRenewDeadline, leaderElectionJitter, o.LeaderElectRetryPeriod)
	}
	if o.Namespace == "" {
		return fmt.Errorf("--namespace must not be empty")
	}
	if o.WriteStatusConfigMap && o.StatusConfigMapName == "" {
		return fmt.Errorf("--status-config-map-name must not be empty when --write-status-configmap is true")
	}
	if o.CloudConfig == "" {
		return fmt.Errorf("--cloud-config is required: the path of the provider's configuration file")
	}
	return nil
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

// stringList is a repeatable flag: each occurrence adds one value.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
