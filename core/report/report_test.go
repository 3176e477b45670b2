package report

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// fixture is a Reporter over a test provider's groups, recording into a
// fake event recorder and a Prometheus registry of the autoscaler's
// collectors (per node group series on).
type fixture struct {
	p        *test.Provider
	registry *clusterstate.Registry
	events   *record.FakeRecorder
	prom     *prometheus.Registry
	r        *Reporter
}

func newFixture(t *testing.T, groups map[string]int) *fixture {
	t.Helper()
	f := &fixture{p: test.NewProvider(), events: record.NewFakeRecorder(100), prom: prometheus.NewRegistry()}
	metrics.RegisterAll(f.prom, true)
	for id, maxSize := range groups {
		f.p.AddNodeGroup(id, 0, maxSize, 0, test.BuildTemplate(id, 1000, test.GiB, nil))
	}
	f.registry = clusterstate.NewRegistry(f.p, config.Defaults())
	if err := f.registry.UpdateNodes(nil, t0); err != nil {
		t.Fatal(err)
	}
	status := &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	f.r = New(Deps{Provider: f.p, Registry: f.registry, Events: f.events, Status: status})
	return f
}

// drain returns the events recorded so far, as "Type Reason message".
func (f *fixture) drain() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// value returns the value of the cluster_autoscaler_<name> series whose
// labels include want (a counter's or a gauge's), and whether it exists.
func (f *fixture) value(t *testing.T, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := f.prom.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cluster_autoscaler_"+name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// wantEvents fails unless got are exactly the events want, in order,
// each given by its start ("Warning FailedToScaleUpGroup Scale-up failed").
func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}
