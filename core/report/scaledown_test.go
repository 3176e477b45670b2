package report

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

var statusRef = &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "cluster-autoscaler-status"}

// metric reads the value of the autoscaler's metric name (without its
// namespace) whose labels include want: a counter's or gauge's value, a
// histogram's sample count; 0 when no series matches.
func metric(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics.RegisterAll(reg, false)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cluster_autoscaler_"+name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func node(name string) *apiv1.Node {
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func pod(ns, name string) *apiv1.Pod {
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// Each removal step becomes the events and metrics the actuator recorded
// itself before: the same reasons, messages, objects and series.
func TestRemovalSteps(t *testing.T) {
	type delta struct {
		name   string
		labels map[string]string
		by     float64
	}
	empty := &scaledown.UnneededNode{Node: node("n1"), GroupID: "g1", Empty: true}
	drained := &scaledown.UnneededNode{Node: node("n2"), GroupID: "g1", PodsToEvict: []*apiv1.Pod{pod("default", "web-1"), pod("default", "web-2")},
		Utilization: utilization.Info{CpuUtil: 0.2, MemUtil: 0.1, Utilization: 0.2, ResourceName: apiv1.ResourceCPU}}
	unready := &scaledown.UnneededNode{Node: node("n3"), GroupID: "g1", Unready: true, DRADrivers: "gpu.example.com"}
	for _, tc := range []struct {
		name   string
		step   func(*Reporter)
		events []string
		deltas []delta
	}{{
		name:   "empty nodes start",
		step:   func(r *Reporter) { r.RemovalsStarted(scaledown.RemovalStart{Nodes: []*scaledown.UnneededNode{empty}}) },
		events: []string{`Normal ScaleDownEmpty Scale-down: removing empty node "n1"`},
	}, {
		name: "drains start",
		step: func(r *Reporter) {
			r.RemovalsStarted(scaledown.RemovalStart{Nodes: []*scaledown.UnneededNode{drained}, Drain: true})
		},
		events: []string{"Normal ScaleDown Scale-down: removing node n2, utilization: {cpu: 0.20, memory: 0.10, gpu: 0.00, utilization: 0.20 (cpu)}, pods to reschedule: default/web-1, default/web-2"},
	}, {
		name:   "node tainted",
		step:   func(r *Reporter) { r.NodeTainted(node("n1")) },
		events: []string{"Normal ScaleDown marked the node as toBeDeleted/unschedulable"},
	}, {
		name:   "pod evicted",
		step:   func(r *Reporter) { r.PodEvicted(pod("default", "web-1")) },
		events: []string{"Normal ScaleDown deleting pod for node scale down"},
	}, {
		name: "evictions answered",
		step: func(r *Reporter) { r.EvictionsEnded(scaledown.Evictions{Succeeded: 3, Failed: 1}) },
		deltas: []delta{
			{"evicted_pods_total", map[string]string{"eviction_result": "succeeded"}, 3},
			{"evicted_pods_total", map[string]string{"eviction_result": "failed"}, 1},
		},
	}, {
		name: "removal failed in the provider",
		step: func(r *Reporter) {
			r.RemovalFailed(scaledown.RemovalFailure{Node: node("n2"), Kind: scaledown.FailedCloudProvider, Err: errors.New("deleting node: 503")})
		},
		events: []string{"Warning ScaleDownFailed failed to remove node: deleting node: 503"},
		deltas: []delta{{"errors_total", map[string]string{"type": metrics.CloudProviderError}, 1}},
	}, {
		name: "drain blocked",
		step: func(r *Reporter) {
			r.RemovalFailed(scaledown.RemovalFailure{Node: node("n2"), Kind: scaledown.FailedTransient, Err: errors.New("drain blocked")})
		},
		events: []string{"Warning ScaleDownFailed failed to remove node: drain blocked"},
		deltas: []delta{{"errors_total", map[string]string{"type": metrics.TransientError}, 1}},
	}, {
		name:   "empty node removed",
		step:   func(r *Reporter) { r.NodeRemoved(empty) },
		events: []string{"Normal ScaleDown node removed by cluster autoscaler"},
		deltas: []delta{{"scaled_down_nodes_total", map[string]string{"reason": metrics.ScaleDownEmpty}, 1}},
	}, {
		name:   "unready node removed",
		step:   func(r *Reporter) { r.NodeRemoved(unready) },
		events: []string{"Normal ScaleDown node removed by cluster autoscaler"},
		deltas: []delta{{"scaled_down_nodes_total", map[string]string{"reason": metrics.ScaleDownUnready, "dra_drivers": "gpu.example.com"}, 1}},
	}, {
		name:   "drained node removed",
		step:   func(r *Reporter) { r.NodeRemoved(drained) },
		events: []string{"Normal ScaleDown node removed by cluster autoscaler"},
		deltas: []delta{{"scaled_down_nodes_total", map[string]string{"reason": metrics.ScaleDownUnderutilized}, 1}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			r := New(Deps{Provider: test.NewProvider(), Events: rec, Status: statusRef})
			before := make([]float64, len(tc.deltas))
			for i, d := range tc.deltas {
				before[i] = metric(t, d.name, d.labels)
			}
			tc.step(r)
			if got := events(rec); !slices.Equal(got, tc.events) {
				t.Errorf("events = %q, want %q", got, tc.events)
			}
			for i, d := range tc.deltas {
				if got := metric(t, d.name, d.labels) - before[i]; got != d.by {
					t.Errorf("%s%v rose by %v, want %v", d.name, d.labels, got, d.by)
				}
			}
		})
	}
}

// A pass's result sets the status ConfigMap's candidates and the
// scale-down gauges; a pass that failed in the planner leaves them as the
// last good pass set them and counts an internal error.
func TestScaleDownPass(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p := test.NewProvider()
	registry := clusterstate.NewRegistry(p, config.AutoscalingOptions{})
	r := New(Deps{Provider: p, Registry: registry, Events: record.NewFakeRecorder(10), Status: statusRef})
	candidates := func() int { return registry.GetStatus(now).ClusterWide.ScaleDown.Candidates }
	skippedCPU := map[string]string{"direction": "down", "reason": metrics.SkippedCPUResourceLimit}
	skippedBefore := metric(t, "skipped_scale_events_count", skippedCPU)
	scaleDownRuns := metric(t, "function_duration_seconds", map[string]string{"function": string(metrics.ScaleDown)})

	r.ScaleDown(now, scaledown.Result{
		Planned:  scaledown.Candidates{ByGroup: map[string]int{"g1": 2, "g2": 1}, Unneeded: 3},
		Unneeded: 3, InCooldown: true,
		Skipped:  []scaledown.Skipped{{Node: "n1", Minimum: resourcequotas.CPU}},
		InFlight: 2,
	}, nil)
	if got := candidates(); got != 3 {
		t.Errorf("status candidates = %d, want 3", got)
	}
	for name, want := range map[string]float64{"unneeded_nodes_count": 3, "scale_down_in_cooldown": 1, "pending_node_deletions": 2} {
		if got := metric(t, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metric(t, "skipped_scale_events_count", skippedCPU) - skippedBefore; got != 1 {
		t.Errorf("skipped scale-downs (cpu minimum) rose by %v, want 1", got)
	}
	if got := metric(t, "function_duration_seconds", map[string]string{"function": string(metrics.ScaleDown)}) - scaleDownRuns; got != 1 {
		t.Errorf("scaleDown durations observed: %v, want 1", got)
	}

	// A removal started: the scale-down activity is now.
	r.ScaleDown(now, scaledown.Result{Planned: scaledown.Candidates{ByGroup: map[string]int{"g1": 1}, Unneeded: 1}, Unneeded: 1, Empty: []string{"n2"}}, nil)
	if got := metric(t, "last_activity", map[string]string{"activity": metrics.ActivityScaleDown}); got != float64(now.Unix()) {
		t.Errorf("last scale-down activity = %v, want %v", got, now.Unix())
	}

	internal := metric(t, "errors_total", map[string]string{"type": metrics.InternalError})
	r.ScaleDown(now.Add(time.Minute), scaledown.Result{}, errors.New("building cluster snapshot"))
	if got := candidates(); got != 1 {
		t.Errorf("status candidates after a failed pass = %d, want 1 (the last good pass's)", got)
	}
	if got := metric(t, "unneeded_nodes_count", nil); got != 1 {
		t.Errorf("unneeded_nodes_count after a failed pass = %v, want 1", got)
	}
	if got := metric(t, "errors_total", map[string]string{"type": metrics.InternalError}) - internal; got != 1 {
		t.Errorf("internal errors rose by %v, want 1", got)
	}

	r.ScaleDownOff()
	if got := candidates(); got != 0 {
		t.Errorf("status candidates with scale-down off = %d, want 0", got)
	}
}
