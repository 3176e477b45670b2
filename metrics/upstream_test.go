package metrics

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
)

type upstreamMetric struct{ typ, labels, registered string }

// readUpstreamMetrics reads testdata/upstream-1.36.1-metrics.tsv, upstream's
// metrics as its RegisterAll registers them.
func readUpstreamMetrics(t *testing.T) map[string]upstreamMetric {
	t.Helper()
	f, err := os.Open("testdata/upstream-1.36.1-metrics.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]upstreamMetric{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if strings.HasPrefix(cols[0], "#") || cols[0] == "name" {
			continue
		}
		out[caNamespace+"_"+cols[0]] = upstreamMetric{cols[1], cols[2], cols[3]}
	}
	return out
}

var (
	fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)
	labelsRE = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

// registered describes every metric RegisterAll registers: name → type and
// label names, whether or not it has a series yet.
func registered(perNodeGroup bool) map[string]upstreamMetric {
	out := map[string]upstreamMetric{}
	for _, c := range collectorsFor(perNodeGroup) {
		typ := "untyped"
		switch c.(type) {
		case prometheus.Gauge, *prometheus.GaugeVec:
			typ = "gauge"
		case prometheus.Counter, *prometheus.CounterVec:
			typ = "counter"
		case prometheus.Histogram, *prometheus.HistogramVec:
			typ = "histogram"
		case prometheus.Summary, *prometheus.SummaryVec:
			typ = "summary"
		}
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			labels := labelsRE.FindStringSubmatch(s)[1]
			if labels == "" {
				labels = "-"
			}
			out[fqNameRE.FindStringSubmatch(s)[1]] = upstreamMetric{typ: typ, labels: labels}
		}
	}
	return out
}

// Every upstream metric is registered with upstream's name, type and label
// names; the per node group ones only with --emit-per-nodegroup-metrics.
// Every other cluster_autoscaler_ metric is this project's DigitalOcean API
// metrics.
func TestRegisteredMetricsMatchUpstream(t *testing.T) {
	upstream := readUpstreamMetrics(t)
	if len(upstream) != 41 {
		t.Fatalf("read %d upstream metrics, want 41", len(upstream))
	}
	for _, perNodeGroup := range []bool{false, true} {
		got := registered(perNodeGroup)
		for name, u := range upstream {
			g, ok := got[name]
			wantRegistered := u.registered == "always" || perNodeGroup
			switch {
			case !ok && wantRegistered:
				t.Errorf("per-node-group=%v: %s (%s{%s}) is not registered", perNodeGroup, name, u.typ, u.labels)
			case ok && !wantRegistered:
				t.Errorf("per-node-group=%v: %s is registered", perNodeGroup, name)
			case ok && (g.typ != u.typ || g.labels != u.labels):
				t.Errorf("%s: %s{%s}, upstream's %s{%s}", name, g.typ, g.labels, u.typ, u.labels)
			}
		}
		var ours []string
		for name := range got {
			if _, ok := upstream[name]; !ok {
				ours = append(ours, name)
				if !strings.HasPrefix(name, caNamespace+"_digitalocean_") && !strings.HasPrefix(name, caNamespace+"_consolidation_") &&
					!strings.HasPrefix(name, caNamespace+"_shadow_") && !strings.HasPrefix(name, caNamespace+"_hourly_cost_") {
					t.Errorf("%s is not upstream's and not a digitalocean_, consolidation_, shadow_ or hourly_cost_ metric", name)
				}
			}
		}
		sort.Strings(ours)
		t.Logf("per-node-group=%v: %d upstream metrics registered; this project's own: %v", perNodeGroup, len(got)-len(ours), ours)
	}
}

// The series upstream creates at zero on start-up are on the first scrape.
func TestUpstreamPreCreatedSeries(t *testing.T) {
	fams := gather(t, newRegistry(t, false))
	p := caNamespace + "_"
	for _, typ := range allErrorTypes {
		mustValue(t, fams, p+"errors_total", map[string]string{"type": typ}, 0)
	}
	for _, r := range []string{"cloudProviderError", "apiCallError", "timeout"} {
		gpu := map[string]string{"reason": r, "gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}
		mustValue(t, fams, p+"failed_scale_ups_total", gpu, 0)
		mustValue(t, fams, p+"scaled_down_nodes_total", gpu, 0)
	}
	for _, r := range []string{"succeeded", "failed"} {
		mustValue(t, fams, p+"evicted_pods_total", map[string]string{"eviction_result": r}, 0)
	}
	for _, d := range []string{"up", "down"} {
		for _, r := range []string{"CpuResourceLimit", "MemoryResourceLimit"} {
			mustValue(t, fams, p+"skipped_scale_events_count", map[string]string{"direction": d, "reason": r}, 0)
		}
	}
	// Plain gauges and counters are on the scrape from the start, as upstream's.
	for _, n := range []string{"pending_node_deletions", "overflowing_controllers_count", "inconsistent_instances_migs_count",
		"max_node_skip_eval_duration_seconds"} {
		mustValue(t, fams, p+n, map[string]string{}, 0)
	}
}

// Function labels of sub-steps are spelled as upstream's.
func TestFunctionLabelsAsUpstream(t *testing.T) {
	for label, want := range map[FunctionLabel]string{
		Estimate: "scaleUp:estimate", BuildPodEquivalenceGroups: "scaleUp:buildPodEquivalenceGroups",
		ScaleDownNodeDeletion: "scaleDown:nodeDeletion", Main: "main", UpdateClusterState: "updateClusterState",
	} {
		if string(label) != want {
			t.Errorf("function label %q, upstream's %q", label, want)
		}
	}
}

// unremovable_nodes_count drops to 0 for a reason no node has any more.
func TestUnremovableNodesCount(t *testing.T) {
	reg := newRegistry(t, false)
	UpdateUnremovableNodesCount(map[string]int{"NotUnderutilized": 2, "BlockedByPod": 1})
	UpdateUnremovableNodesCount(map[string]int{"NotUnderutilized": 3})
	fams := gather(t, reg)
	mustValue(t, fams, caNamespace+"_unremovable_nodes_count", map[string]string{"reason": "NotUnderutilized"}, 3)
	mustValue(t, fams, caNamespace+"_unremovable_nodes_count", map[string]string{"reason": "BlockedByPod"}, 0)
}

// client-go's rest_client_* metrics reach the registry upstream serves,
// legacyregistry, as soon as the Kubernetes client makes a request.
func TestRestClientMetricsInLegacyRegistry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		names[mf.GetName()] = mf
	}
	for _, n := range []string{"rest_client_requests_total", "rest_client_request_duration_seconds"} {
		if names[n] == nil {
			t.Errorf("%s not in legacyregistry", n)
		}
	}
}
