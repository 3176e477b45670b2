package report

import (
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/core/consolidation"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// gathered reads a metric's value from reg by name and label values.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

// Each outcome is an event on the status ConfigMap and on every node the
// command removes, with the saving; the counters follow, and a success adds
// its saving to the savings gauge.
func TestConsolidationOutcomes(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.RegisterAll(reg, false)
	rec := record.NewFakeRecorder(100)
	status := &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	r := New(Deps{Events: rec, Status: status})
	cmd := consolidation.Command{Kind: consolidation.Replace, Count: 1, RemovedPrice: 0.2142, Saving: 0.1428,
		Remove:      []consolidation.Candidate{{Node: test.BuildNode("a", 4000, test.GiB)}, {Node: test.BuildNode("b", 4000, test.GiB)}},
		Replacement: &consolidation.Replacement{Size: "s-4vcpu-8gb"}}
	before := gathered(t, reg, "cluster_autoscaler_consolidation_savings_per_hour", nil)
	for _, o := range []consolidation.Outcome{
		{Command: cmd, Result: consolidation.Planned},
		{Command: cmd, Result: consolidation.Succeeded},
		{Command: cmd, Result: consolidation.Aborted, Reason: "the replacement was not Ready"},
	} {
		r.Consolidation(o)
	}
	close(rec.Events)
	var events []string
	for e := range rec.Events {
		events = append(events, e)
	}
	for _, want := range []string{"Normal ConsolidationPlanned", "Normal Consolidated", "Warning ConsolidationAborted"} {
		n := 0
		for _, e := range events {
			if strings.HasPrefix(e, want) && strings.Contains(e, "saving $0.1428/h") {
				n++
			}
		}
		if n != 3 { // the status ConfigMap and the two nodes
			t.Errorf("%d %q events with the saving, want 3: %v", n, want, events)
		}
	}
	for _, result := range []string{"planned", "succeeded", "aborted"} {
		if v := gathered(t, reg, "cluster_autoscaler_consolidation_commands_total", map[string]string{"kind": "replace", "result": result}); v < 1 {
			t.Errorf("commands_total{replace,%s} = %v", result, v)
		}
	}
	if v := gathered(t, reg, "cluster_autoscaler_consolidation_commands_total", map[string]string{"kind": "delete", "result": "aborted"}); v != 0 {
		t.Errorf("a series no command reached: %v, want 0", v)
	}
	if got := gathered(t, reg, "cluster_autoscaler_consolidation_savings_per_hour", nil) - before; got < 0.1427 || got > 0.1429 {
		t.Errorf("savings rose by %v, want the one success's 0.1428", got)
	}
}
