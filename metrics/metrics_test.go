package metrics

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// resetAll clears the package-level collectors so each test starts from zero.
func resetAll() {
	for _, c := range append(baseCollectors(), perNodeGroupCollectors()...) {
		switch v := c.(type) {
		case *prometheus.GaugeVec:
			v.Reset()
		case *prometheus.CounterVec:
			v.Reset()
		case *prometheus.HistogramVec:
			v.Reset()
		case *prometheus.SummaryVec:
			v.Reset()
		case prometheus.Gauge:
			v.Set(0)
		}
	}
	perNodeGroupEnabled.Store(false)
}

func newRegistry(t *testing.T, perNodeGroup bool) *prometheus.Registry {
	t.Helper()
	resetAll()
	reg := prometheus.NewPedanticRegistry()
	RegisterAll(reg, perNodeGroup)
	return reg
}

// gather returns the scraped families by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// value finds the sample of family name with exactly labels and returns its
// gauge/counter value; ok is false when no such series exists.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, found := fams[name]
	if !found {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		got := labelsOf(m)
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			if got[k] != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := value(fams, name, labels)
	if !ok {
		t.Errorf("%s%v: series missing", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func TestRegisterAllExposesUpstreamNames(t *testing.T) {
	reg := newRegistry(t, false)
	// Touch every vector once so it appears in a scrape.
	UpdateClusterSafeToAutoscale(true)
	UpdateNodesCount(3, 1, 1, 0, 2)
	UpdateNodeGroupsCount(2, 0)
	UpdateUnschedulablePodsCount(5, 1)
	UpdateMaxNodesCount(10)
	UpdateClusterCPUCurrentCores(12)
	UpdateCPULimitsCores(0, 320000)
	UpdateClusterMemoryCurrentBytes(48 << 30)
	UpdateMemoryLimitsBytes(0, 6400000<<30)
	UpdateLastTime(ActivityMain, time.Unix(1700000000, 0))
	UpdateDurationFromStart(Main, time.Now().Add(-2*time.Second))
	RegisterScaleUp(2, "", "", "")
	RegisterFailedScaleUp(FailedScaleUpTimeout, "", "", "")
	RegisterScaleDown(1, ScaleDownEmpty, "", "", "")
	RegisterEvictions(3, true)
	UpdateUnneededNodesCount(1)
	UpdateScaleDownInCooldown(false)
	RegisterSkippedScaleUp(SkippedMaxNodesTotalReached)
	DOAPIObserver{}.ObserveCall("ListNodePools", 200, 50*time.Millisecond, nil)
	DOAPIObserver{}.ObserveRateLimit(5000, 4990, time.Unix(1700000060, 0))
	DOAPIObserver{}.ObservePoolRefused("bounds")

	fams := gather(t, reg)
	want := []string{
		"cluster_safe_to_autoscale", "nodes_count", "node_groups_count", "unschedulable_pods_count",
		"max_nodes_count", "cluster_cpu_current_cores", "cpu_limits_cores", "cluster_memory_current_bytes",
		"memory_limits_bytes", "last_activity", "function_duration_seconds",
		"function_duration_quantile_seconds", "scaled_up_nodes_total", "failed_scale_ups_total",
		"scaled_down_nodes_total", "evicted_pods_total", "errors_total", "unneeded_nodes_count",
		"scale_down_in_cooldown", "skipped_scale_events_count",
		"digitalocean_api_requests_total", "digitalocean_api_request_duration_seconds",
		"digitalocean_api_rate_limit_remaining", "digitalocean_api_rate_limit_limit",
		"digitalocean_api_rate_limit_reset_timestamp_seconds", "digitalocean_node_pools_refused_total",
	}
	for _, n := range want {
		if _, ok := fams["cluster_autoscaler_"+n]; !ok {
			t.Errorf("cluster_autoscaler_%s not exposed", n)
		}
	}
	for _, n := range []string{"node_group_min_count", "node_group_max_count", "node_group_target_count"} {
		if _, ok := fams["cluster_autoscaler_"+n]; ok {
			t.Errorf("cluster_autoscaler_%s exposed without emitPerNodeGroupMetrics", n)
		}
	}
	wantTypes := map[string]dto.MetricType{
		"cluster_autoscaler_function_duration_seconds":          dto.MetricType_HISTOGRAM,
		"cluster_autoscaler_function_duration_quantile_seconds": dto.MetricType_SUMMARY,
		"cluster_autoscaler_errors_total":                       dto.MetricType_COUNTER,
		"cluster_autoscaler_nodes_count":                        dto.MetricType_GAUGE,
		"cluster_autoscaler_skipped_scale_events_count":         dto.MetricType_COUNTER,
	}
	for n, typ := range wantTypes {
		if got := fams[n].GetType(); got != typ {
			t.Errorf("%s type = %v, want %v", n, got, typ)
		}
	}
}

func TestGaugeValuesAsADashboardReadsThem(t *testing.T) {
	reg := newRegistry(t, false)
	UpdateClusterSafeToAutoscale(true)
	UpdateNodesCount(3, 1, 2, 4, 5)
	UpdateNodeGroupsCount(2, 0)
	UpdateUnschedulablePodsCount(7, 1)
	UpdateCPULimitsCores(4, 64)
	UpdateMemoryLimitsBytes(1<<30, 256<<30)
	UpdateLastTime(ActivityScaleUp, time.Unix(1700000123, 0))
	UpdateScaleDownInCooldown(true)
	UpdateUnneededNodesCount(2)
	fams := gather(t, reg)

	p := "cluster_autoscaler_"
	mustValue(t, fams, p+"cluster_safe_to_autoscale", nil, 1)
	for state, want := range map[string]float64{"ready": 3, "unready": 1, "notStarted": 2, "longUnregistered": 4, "unregistered": 5, "suspended": 0} {
		mustValue(t, fams, p+"nodes_count", map[string]string{"state": state}, want)
	}
	mustValue(t, fams, p+"node_groups_count", map[string]string{"node_group_type": "autoscaled"}, 2)
	mustValue(t, fams, p+"node_groups_count", map[string]string{"node_group_type": "autoprovisioned"}, 0)
	mustValue(t, fams, p+"unschedulable_pods_count", map[string]string{"type": "unschedulable"}, 7)
	mustValue(t, fams, p+"unschedulable_pods_count", map[string]string{"type": "scheduler_unprocessed"}, 1)
	mustValue(t, fams, p+"cpu_limits_cores", map[string]string{"direction": "minimum"}, 4)
	mustValue(t, fams, p+"cpu_limits_cores", map[string]string{"direction": "maximum"}, 64)
	mustValue(t, fams, p+"memory_limits_bytes", map[string]string{"direction": "maximum"}, 256<<30)
	mustValue(t, fams, p+"last_activity", map[string]string{"activity": "scaleUp"}, 1700000123)
	mustValue(t, fams, p+"scale_down_in_cooldown", nil, 1)
	mustValue(t, fams, p+"unneeded_nodes_count", nil, 2)

	UpdateClusterSafeToAutoscale(false)
	UpdateScaleDownInCooldown(false)
	fams = gather(t, reg)
	mustValue(t, fams, p+"cluster_safe_to_autoscale", nil, 0)
	mustValue(t, fams, p+"scale_down_in_cooldown", nil, 0)
}

func TestErrorsTotalPreinitialised(t *testing.T) {
	reg := newRegistry(t, false)
	fams := gather(t, reg)
	var got []string
	for _, m := range fams["cluster_autoscaler_errors_total"].GetMetric() {
		got = append(got, labelsOf(m)["type"])
		if v := m.GetCounter().GetValue(); v != 0 {
			t.Errorf("errors_total{type=%q} = %v before any error", labelsOf(m)["type"], v)
		}
	}
	sort.Strings(got)
	want := append([]string(nil), allErrorTypes...)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("errors_total types = %v, want %v", got, want)
	}

	RegisterError(CloudProviderError)
	RegisterError(CloudProviderError)
	mustValue(t, gather(t, reg), "cluster_autoscaler_errors_total", map[string]string{"type": "cloudProviderError"}, 2)
}

func TestCounters(t *testing.T) {
	reg := newRegistry(t, false)
	RegisterScaleUp(3, "", "", "")
	RegisterScaleUp(2, "nvidia.com/gpu", "nvidia-h100", "")
	RegisterScaleUp(1, "", "", "gpu.nvidia.com")
	RegisterFailedScaleUp(FailedScaleUpCloudProviderError, "", "", "")
	RegisterFailedScaleUp(FailedScaleUpTimeout, "", "", "gpu.nvidia.com")
	RegisterScaleDown(1, ScaleDownUnderutilized, "", "", "")
	RegisterScaleDown(2, ScaleDownEmpty, "", "", "")
	RegisterScaleDown(1, ScaleDownEmpty, "", "", "gpu.amd.com")
	RegisterEvictions(4, true)
	RegisterEvictions(1, false)
	RegisterSkippedScaleUp(SkippedCPUResourceLimit)
	RegisterSkippedScaleDown(SkippedMemoryResourceLimit)
	fams := gather(t, reg)
	p := "cluster_autoscaler_"
	mustValue(t, fams, p+"scaled_up_nodes_total", map[string]string{"gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}, 3)
	mustValue(t, fams, p+"scaled_up_nodes_total", map[string]string{"gpu_resource_name": "nvidia.com/gpu", "gpu_name": "nvidia-h100", "dra_drivers": ""}, 2)
	mustValue(t, fams, p+"scaled_up_nodes_total", map[string]string{"gpu_resource_name": "", "gpu_name": "", "dra_drivers": "gpu.nvidia.com"}, 1)
	mustValue(t, fams, p+"failed_scale_ups_total", map[string]string{"reason": "cloudProviderError", "gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}, 1)
	mustValue(t, fams, p+"failed_scale_ups_total", map[string]string{"reason": "timeout", "gpu_resource_name": "", "gpu_name": "", "dra_drivers": "gpu.nvidia.com"}, 1)
	mustValue(t, fams, p+"scaled_down_nodes_total", map[string]string{"reason": "underutilized", "gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}, 1)
	mustValue(t, fams, p+"scaled_down_nodes_total", map[string]string{"reason": "empty", "gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}, 2)
	mustValue(t, fams, p+"scaled_down_nodes_total", map[string]string{"reason": "empty", "gpu_resource_name": "", "gpu_name": "", "dra_drivers": "gpu.amd.com"}, 1)
	mustValue(t, fams, p+"evicted_pods_total", map[string]string{"eviction_result": "succeeded"}, 4)
	mustValue(t, fams, p+"evicted_pods_total", map[string]string{"eviction_result": "failed"}, 1)
	mustValue(t, fams, p+"skipped_scale_events_count", map[string]string{"direction": "up", "reason": "CpuResourceLimit"}, 1)
	mustValue(t, fams, p+"skipped_scale_events_count", map[string]string{"direction": "down", "reason": "MemoryResourceLimit"}, 1)
}

func TestFunctionDuration(t *testing.T) {
	reg := newRegistry(t, false)
	UpdateDuration(ScaleUp, 250*time.Millisecond)
	UpdateDuration(ScaleUp, 3*time.Second)
	UpdateDurationFromStart(Main, time.Now().Add(-time.Second))
	fams := gather(t, reg)
	mustValue(t, fams, "cluster_autoscaler_function_duration_seconds", map[string]string{"function": "scaleUp"}, 2)
	mustValue(t, fams, "cluster_autoscaler_function_duration_quantile_seconds", map[string]string{"function": "scaleUp"}, 2)
	mustValue(t, fams, "cluster_autoscaler_function_duration_seconds", map[string]string{"function": "main"}, 1)

	h := fams["cluster_autoscaler_function_duration_seconds"].GetMetric()[0].GetHistogram()
	buckets := h.GetBucket()
	first, last := buckets[0].GetUpperBound(), buckets[len(buckets)-1].GetUpperBound()
	if math.Abs(first-0.1) > 1e-9 || math.Abs(last-1800) > 1e-6 || len(buckets) != 150 {
		t.Errorf("%d buckets spanning %v..%v, want upstream's 150 from 0.1 to 1800", len(buckets), first, last)
	}
	for _, m := range fams["cluster_autoscaler_function_duration_seconds"].GetMetric() {
		if labelsOf(m)["function"] != "scaleUp" {
			continue
		}
		if got := m.GetHistogram().GetSampleSum(); math.Abs(got-3.25) > 1e-9 {
			t.Errorf("scaleUp sum = %v, want 3.25", got)
		}
	}
}

func TestPerNodeGroupMetrics(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		reg := newRegistry(t, false)
		UpdateNodeGroupMetrics("pool-1", 1, 5, 3)
		fams := gather(t, reg)
		if _, ok := fams["cluster_autoscaler_node_group_target_count"]; ok {
			t.Error("node_group_target_count exposed without emitPerNodeGroupMetrics")
		}
		if n := testutil.CollectAndCount(nodeGroupTargetCount); n != 0 {
			t.Errorf("per node group series kept while disabled: %d", n)
		}
	})
	t.Run("enabled", func(t *testing.T) {
		reg := newRegistry(t, true)
		UpdateNodeGroupMetrics("pool-1", 1, 5, 3)
		UpdateNodeGroupMetrics("pool-2", 0, 10, 0)
		fams := gather(t, reg)
		p := "cluster_autoscaler_"
		mustValue(t, fams, p+"node_group_min_count", map[string]string{"node_group": "pool-1"}, 1)
		mustValue(t, fams, p+"node_group_max_count", map[string]string{"node_group": "pool-1"}, 5)
		mustValue(t, fams, p+"node_group_target_count", map[string]string{"node_group": "pool-1"}, 3)
		mustValue(t, fams, p+"node_group_max_count", map[string]string{"node_group": "pool-2"}, 10)

		DeleteNodeGroupMetrics("pool-2")
		fams = gather(t, reg)
		if _, ok := value(fams, p+"node_group_max_count", map[string]string{"node_group": "pool-2"}); ok {
			t.Error("pool-2 series still exposed after DeleteNodeGroupMetrics")
		}
		mustValue(t, fams, p+"node_group_max_count", map[string]string{"node_group": "pool-1"}, 5)
	})
}

func TestRegisterAllTwiceIsHarmless(t *testing.T) {
	reg := newRegistry(t, true)
	RegisterAll(reg, true)
	RegisterError(InternalError)
	mustValue(t, gather(t, reg), "cluster_autoscaler_errors_total", map[string]string{"type": "internalError"}, 1)
}

func TestCallsBeforeRegisterDoNotPanic(t *testing.T) {
	resetAll()
	UpdateNodesCount(1, 0, 0, 0, 0)
	RegisterError(TransientError)
	DOAPIObserver{}.ObserveCall("GetNodePoolTemplate", 0, time.Second, errors.New("dial tcp: timeout"))
	// Registering afterwards exposes what was recorded.
	reg := prometheus.NewPedanticRegistry()
	RegisterAll(reg, false)
	mustValue(t, gather(t, reg), "cluster_autoscaler_nodes_count", map[string]string{"state": "ready"}, 1)
}

func TestDOAPIObserver(t *testing.T) {
	tests := []struct {
		name       string
		operation  string
		statusCode int
		err        error
		wantCode   string
	}{
		{"success", "ListNodePools", 200, nil, "200"},
		{"rate limited", "UpdateNodePool", 429, errors.New("429 Too Many Requests"), "429"},
		{"server error", "DeleteNode", 503, errors.New("503"), "503"},
		{"transport failure", "GetNodePoolTemplate", 0, errors.New("context deadline exceeded"), "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := newRegistry(t, false)
			var o interface {
				ObserveCall(operation string, statusCode int, duration time.Duration, err error)
				ObserveRateLimit(limit, remaining int, reset time.Time)
			} = DOAPIObserver{}
			o.ObserveCall(tc.operation, tc.statusCode, 120*time.Millisecond, tc.err)
			o.ObserveCall(tc.operation, tc.statusCode, 80*time.Millisecond, tc.err)
			fams := gather(t, reg)
			mustValue(t, fams, "cluster_autoscaler_digitalocean_api_requests_total",
				map[string]string{"operation": tc.operation, "code": tc.wantCode}, 2)
			mustValue(t, fams, "cluster_autoscaler_digitalocean_api_request_duration_seconds",
				map[string]string{"operation": tc.operation}, 2)
		})
	}
}

func TestDOAPIObserverRateLimit(t *testing.T) {
	reg := newRegistry(t, false)
	reset := time.Unix(1700000600, 0)
	DOAPIObserver{}.ObserveRateLimit(5000, 4321, reset)
	fams := gather(t, reg)
	p := "cluster_autoscaler_digitalocean_api_"
	mustValue(t, fams, p+"rate_limit_limit", nil, 5000)
	mustValue(t, fams, p+"rate_limit_remaining", nil, 4321)
	mustValue(t, fams, p+"rate_limit_reset_timestamp_seconds", nil, 1700000600)

	// A response without rate-limit headers must not zero the gauges.
	DOAPIObserver{}.ObserveRateLimit(0, 0, time.Time{})
	fams = gather(t, reg)
	mustValue(t, fams, p+"rate_limit_remaining", nil, 4321)

	// An exhausted window reads 0.
	DOAPIObserver{}.ObserveRateLimit(5000, 0, reset)
	mustValue(t, gather(t, reg), p+"rate_limit_remaining", nil, 0)
}

// TestLint runs Prometheus' own linter over the exposed metrics; upstream's
// names are kept even where the linter would prefer others, so only problems
// on this project's own metrics fail the test.
func TestLint(t *testing.T) {
	reg := newRegistry(t, true)
	DOAPIObserver{}.ObserveCall("ListNodePools", 200, time.Millisecond, nil)
	DOAPIObserver{}.ObserveRateLimit(5000, 1, time.Unix(1, 0))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "cluster_autoscaler_digitalocean_") {
			t.Errorf("lint %s: %s", p.Metric, p.Text)
		} else {
			t.Logf("upstream name kept: %s: %s", p.Metric, p.Text)
		}
	}
}
