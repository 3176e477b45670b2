package config

import (
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) (AutoscalingOptions, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return NewFlags(fs).Parse(append([]string{"--cloud-config=/etc/do/cloud.json"}, args...))
}

func TestDefaultsMatchUpstream(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"scan-interval", o.ScanInterval, 10 * time.Second},
		{"expander", strings.Join(o.ExpanderNames, ","), "least-waste"},
		{"cores-total max", o.MaxCoresTotal, int64(320000)},
		{"memory-total max", o.MaxMemoryTotal, int64(6400000) * GiB},
		{"scale-down-unneeded-time", o.NodeGroupDefaults.ScaleDownUnneededTime, 10 * time.Minute},
		{"scale-down-utilization-threshold", o.NodeGroupDefaults.ScaleDownUtilizationThreshold, 0.5},
		{"max-node-provision-time", o.NodeGroupDefaults.MaxNodeProvisionTime, 15 * time.Minute},
		{"scale-down-delay-after-add", o.ScaleDownDelayAfterAdd, 10 * time.Minute},
		{"scale-down-delay-after-failure", o.ScaleDownDelayAfterFailure, 3 * time.Minute},
		{"max-graceful-termination-sec", o.MaxGracefulTerminationSec, 600},
		{"max-scale-down-parallelism", o.MaxScaleDownParallelism, 10},
		{"max-drain-parallelism", o.MaxDrainParallelism, 1},
		{"scale-down-non-empty-candidates-count", o.ScaleDownNonEmptyCandidatesCount, 30},
		{"scale-down-candidates-pool-ratio", o.ScaleDownCandidatesPoolRatio, 0.1},
		{"scale-down-candidates-pool-min-count", o.ScaleDownCandidatesPoolMinCount, 50},
		{"scale-down-simulation-timeout", o.ScaleDownSimulationTimeout, 30 * time.Second},
		{"blocking-system-pod-distruption-timeout", o.BspDisruptionTimeout, time.Hour},
		{"address", o.Address, ":8085"},
		{"namespace", o.Namespace, "kube-system"},
		{"status-config-map-name", o.StatusConfigMapName, "cluster-autoscaler-status"},
		{"leader-elect", o.LeaderElect, true},
		{"leader-elect-resource-name", o.LeaderElectResourceName, "cluster-autoscaler"},
		{"initial-node-group-backoff-duration", o.InitialNodeGroupBackoffDuration, 5 * time.Minute},
		{"max-node-group-backoff-duration", o.MaxNodeGroupBackoffDuration, 30 * time.Minute},
		{"pending-pods-batch-idle", o.TriggerIdleWindow, 500 * time.Millisecond},
		{"pending-pods-batch-max", o.TriggerMaxWindow, time.Second},
		{"enable-dynamic-resource-allocation", o.DynamicResourceAllocationEnabled, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestFlagValues(t *testing.T) {
	o, err := parse(t, "--cores-total=2:64", "--memory-total=4:256", "--expander=priority,least-waste",
		"--scale-down-unneeded-time=5s", "--max-nodes-total=12")
	if err != nil {
		t.Fatal(err)
	}
	if o.MinCoresTotal != 2 || o.MaxCoresTotal != 64 {
		t.Errorf("cores: %d:%d", o.MinCoresTotal, o.MaxCoresTotal)
	}
	if o.MinMemoryTotal != 4*GiB || o.MaxMemoryTotal != 256*GiB {
		t.Errorf("memory: %d:%d", o.MinMemoryTotal, o.MaxMemoryTotal)
	}
	if strings.Join(o.ExpanderNames, ",") != "priority,least-waste" {
		t.Errorf("expanders: %v", o.ExpanderNames)
	}
	if o.NodeGroupDefaults.ScaleDownUnneededTime != 5*time.Second || o.MaxNodesTotal != 12 {
		t.Errorf("unexpected %+v", o)
	}
}

// The taint flags repeat; the deprecated --ignore-taint adds startup taints.
func TestTaintFlags(t *testing.T) {
	o, err := parse(t, "--startup-taint=node.cilium.io/agent-not-ready", "--startup-taint=example.com/csi",
		"--ignore-taint=example.com/legacy", "--status-taint=example.com/degraded")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.StartupTaints, ","); got != "node.cilium.io/agent-not-ready,example.com/csi,example.com/legacy" {
		t.Errorf("startup taints %q", got)
	}
	if got := strings.Join(o.StatusTaints, ","); got != "example.com/degraded" {
		t.Errorf("status taints %q", got)
	}
}

// A flag given with its default value still counts as given: the provider
// must not replace an operator's explicit choice with the cluster's setting.
func TestFlagsGivenAreRecorded(t *testing.T) {
	o, err := parse(t, "--scale-down-utilization-threshold=0.5")
	if err != nil {
		t.Fatal(err)
	}
	if !o.FlagsGiven["scale-down-utilization-threshold"] || !o.FlagsGiven["cloud-config"] {
		t.Errorf("given flags %v", o.FlagsGiven)
	}
	if o.FlagsGiven["scale-down-unneeded-time"] {
		t.Error("a flag left at its default is recorded as given")
	}
}

func TestInvalidFlagsNameTheFlag(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--cores-total=8"}, "--cores-total"},
		{[]string{"--cores-total=9:3"}, "--cores-total"},
		{[]string{"--memory-total=a:3"}, "--memory-total"},
		{[]string{"--expander=cheapest"}, "--expander"},
		{[]string{"--expander=grpc"}, "grpc expander is not supported"},
		{[]string{"--expander=random,random"}, "listed twice"},
		{[]string{"--estimator=oldbinpacking"}, "--estimator"},
		{[]string{"--leader-elect-resource-lock=endpoints"}, "--leader-elect-resource-lock"},
		{[]string{"--scan-interval=0s"}, "--scan-interval"},
		{[]string{"--scale-down-utilization-threshold=1.5"}, "--scale-down-utilization-threshold"},
		{[]string{"--scale-down-unneeded-time=-1m"}, "--scale-down-unneeded-time"},
		{[]string{"--max-nodes-total=-1"}, "--max-nodes-total"},
		{[]string{"--max-empty-bulk-delete=0"}, "--max-empty-bulk-delete"},
		{[]string{"--max-scale-down-parallelism=0"}, "--max-scale-down-parallelism"},
		{[]string{"--max-drain-parallelism=-1"}, "--max-drain-parallelism"},
		{[]string{"--scale-down-candidates-pool-ratio=1.5"}, "--scale-down-candidates-pool-ratio"},
		{[]string{"--scale-down-candidates-pool-min-count=-1"}, "--scale-down-candidates-pool-min-count"},
		{[]string{"--scale-down-simulation-timeout=0s"}, "--scale-down-simulation-timeout"},
		{[]string{"--blocking-system-pod-distruption-timeout=-1m"}, "--blocking-system-pod-distruption-timeout"},
		{[]string{"--max-total-unready-percentage=101"}, "--max-total-unready-percentage"},
		{[]string{"--pending-pods-batch-idle=20s"}, "--pending-pods-batch-idle"},
		{[]string{"--leader-elect-renew-deadline=20s"}, "--leader-elect-renew-deadline"},
		{[]string{"--leader-elect-retry-period=10s"}, "--leader-elect-retry-period"},
		{[]string{"--leader-elect-renew-deadline=2s"}, "--leader-elect-retry-period (2s)"},
		{[]string{"--namespace="}, "--namespace"},
		{[]string{"--cloud-config="}, "--cloud-config is required"},
		{[]string{"--startup-taint=bad key"}, "--startup-taint"},
		{[]string{"--status-taint="}, "--status-taint"},
		{[]string{"--ignore-taint=a/b/c"}, "--ignore-taint"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := parse(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

func TestUnsupportedUpstreamFlagsAreRefused(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--nodes=1:10:pool"}, "--nodes is an upstream cluster-autoscaler flag this build does not support"},
		{[]string{"--v=4", "--node-group-auto-discovery", "x"}, "--node-group-auto-discovery"},
		{[]string{"--gpu-total=nvidia:0:4"}, "--gpu-total"},
		{[]string{"--regional"}, "--regional is an upstream cluster-autoscaler flag this build does not support: a GCE flag"},
		{[]string{"--cloud_provider_gce_lb_src_cidrs=x"}, "--cloud-provider-gce-lb-src-cidrs"},
		{[]string{"--ginkgo.v"}, "--ginkgo.v"},
		{[]string{"--max-node-startup-time=10m"}, "--max-node-startup-time=10m0s is refused: this build supports only upstream's default (15m0s)"},
		{[]string{"--node-deletion-batcher-interval=3s"}, "--node-deletion-batcher-interval=3s is refused"},
		{[]string{"--bypassed-scheduler-names=a,b"}, "--bypassed-scheduler-names=[a,b] is refused"},
		// Refused as upstream refuses it (klog.Fatalf there), with its words.
		{[]string{"--enable-dynamic-resource-allocation=false"}, "--enable-dynamic-resource-allocation flag must be true: false"},
	}
	for _, c := range cases {
		_, err := parse(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.wantErr)
		}
	}
}

// --max-empty-bulk-delete is not an upstream 1.36 flag: it is accepted as a
// deprecated alias of --max-scale-down-parallelism, with a warning, and
// --max-scale-down-parallelism wins when both are given.
func TestMaxEmptyBulkDeleteIsDeprecatedAlias(t *testing.T) {
	cases := []struct {
		args     []string
		want     int
		warnings string
	}{
		{nil, 10, ""},
		{[]string{"--max-empty-bulk-delete=25"}, 25, "--max-empty-bulk-delete is deprecated: use --max-scale-down-parallelism (now 25)"},
		{[]string{"--max-empty-bulk-delete=25", "--max-scale-down-parallelism=4"}, 4, "--max-empty-bulk-delete is deprecated and ignored: --max-scale-down-parallelism=4 is given"},
		{[]string{"--max-scale-down-parallelism=4"}, 4, ""},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := NewFlags(fs)
			o, err := f.Parse(append([]string{"--cloud-config=/c.json"}, c.args...))
			if err != nil {
				t.Fatal(err)
			}
			if o.MaxScaleDownParallelism != c.want {
				t.Errorf("max scale-down parallelism = %d, want %d", o.MaxScaleDownParallelism, c.want)
			}
			if got := strings.Join(f.Warnings(), "; "); got != c.warnings {
				t.Errorf("warnings %q, want %q", got, c.warnings)
			}
		})
	}
}

// 0 or less for --scale-down-non-empty-candidates-count is no limit
// (upstream's help), not an error.
func TestNonEmptyCandidatesCountAcceptsNoLimit(t *testing.T) {
	for _, v := range []int{0, -1} {
		o, err := parse(t, "--scale-down-non-empty-candidates-count="+strconv.Itoa(v))
		if err != nil {
			t.Fatalf("%d refused: %v", v, err)
		}
		if o.ScaleDownNonEmptyCandidatesCount != v {
			t.Errorf("got %d, want %d", o.ScaleDownNonEmptyCandidatesCount, v)
		}
	}
}

// Upstream's default value of a default-only flag is accepted, in whatever
// spelling upstream accepts.
func TestDefaultOnlyFlagsAcceptUpstreamDefault(t *testing.T) {
	_, err := parse(t, "--node-deletion-delay-timeout=2m", "--cordon_node_before_terminating=true", "--cordon-node-before-terminating",
		"--unremovable-node-recheck-timeout=5m0s", "--node_delete_delay_after_taint=5s", "--bypassed-scheduler-names=",
		"--max-bulk-soft-taint-count", "10")
	if err != nil {
		t.Fatal(err)
	}
}

// One start reports every problem of the command line, not only the first.
func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	_, err := parse(t, "--nodes=1:3:p", "--node-deletion-batcher-interval=4s", "--scan-interval=soon", "--cores-total=8", "--scale-down-utilization-threshold=2", "--user_agent=x")
	var problems FlagErrors
	if !errors.As(err, &problems) {
		t.Fatalf("got %v, want FlagErrors", err)
	}
	for _, want := range []string{"--nodes", "--node-deletion-batcher-interval=4s", "--scan-interval=soon", "--cores-total", "--scale-down-utilization-threshold", "--user-agent"} {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p.Error(), want)
		}
		if !found {
			t.Errorf("no problem names %s; got:\n%v", want, err)
		}
	}
	if len(problems) != 6 {
		t.Errorf("got %d problems, want 6:\n%v", len(problems), err)
	}
}

// Like upstream, "_" and "-" are the same word separator in flag names.
func TestUnderscoreAndHyphenSpellingsAreTheSameFlag(t *testing.T) {
	o, err := parse(t, "--scan_interval=3s", "--max_nodes_total=7", "--log_file_max_size=1800", "--skip-headers=false", "--v=2")
	if err != nil {
		t.Fatal(err)
	}
	if o.ScanInterval != 3*time.Second || o.MaxNodesTotal != 7 {
		t.Errorf("scan interval %v, max nodes %d", o.ScanInterval, o.MaxNodesTotal)
	}
	if !o.FlagsGiven["scan-interval"] {
		t.Errorf("flags given are recorded by their hyphenated name: %v", o.FlagsGiven)
	}
}

func TestDrainPriorityConfig(t *testing.T) {
	o, err := parse(t, "--drain-priority-config=10000:20,0:60,1000:100")
	if err != nil {
		t.Fatal(err)
	}
	want := []DrainPriority{{0, 60}, {1000, 100}, {10000, 20}}
	if !reflect.DeepEqual(o.DrainPriorities, want) {
		t.Fatalf("DrainPriorities = %v, want %v (ascending)", o.DrainPriorities, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--drain-priority-config=10000"}, "--drain-priority-config: \"10000\" is not a priority:gracePeriodSeconds pair"},
		{[]string{"--drain-priority-config=high:20"}, "priority \"high\" is not a 32-bit integer"},
		{[]string{"--drain-priority-config=0:60", "--max-graceful-termination-sec=30"}, "cannot be used together with --max-graceful-termination-sec"},
	} {
		if _, err := parse(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
