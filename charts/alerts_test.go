package charts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// exportedMetrics are the metric names the binary registers (the per node
// group ones included) with their label names: what a scrape can return.
// Histograms and summaries also serve _bucket, _sum and _count.
type exportedMetrics map[string][]string

// describer is a Registerer that keeps what each collector describes, and
// whether it is a histogram or summary.
type describer struct {
	descs   []*prometheus.Desc
	buckets map[*prometheus.Desc]bool
}

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs = append(d.descs, desc)
		switch c.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec, prometheus.Summary, *prometheus.SummaryVec:
			d.buckets[desc] = true
		}
	}
	return nil
}
func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}
func (d *describer) Unregister(prometheus.Collector) bool { return false }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

func binaryMetrics(t *testing.T) exportedMetrics {
	t.Helper()
	d := &describer{buckets: map[*prometheus.Desc]bool{}}
	metrics.RegisterAll(d, true)
	out := exportedMetrics{}
	for _, desc := range d.descs {
		s := desc.String()
		name := descName.FindStringSubmatch(s)[1]
		var labels []string
		if m := descLabels.FindStringSubmatch(s); m != nil && m[1] != "" {
			labels = strings.Split(m[1], ",")
		}
		out[name] = labels
		if d.buckets[desc] {
			// Only a histogram or summary serves these: a gauge named
			// *_count (nodes_count) is not the _count of another metric.
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				out[name+suffix] = append(append([]string{}, labels...), "le", "quantile")
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("found %d metrics registered by metrics.RegisterAll, want every one", len(out))
	}
	return out
}

// Labels a scrape adds to every series (target labels of a ServiceMonitor
// or pod-annotation scrape), which a selector may name.
var targetLabels = []string{"namespace", "job", "instance", "pod", "service", "container", "endpoint"}

var (
	seriesRef = regexp.MustCompile(`\b((?:cluster_autoscaler|go|process|rest_client)_[a-zA-Z0-9_]+)(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// checkQuery says which metrics and label names a PromQL expression or a
// series notation names that the binary does not export; it wants one at
// least.
func (m exportedMetrics) checkQuery(t *testing.T, where, q string) {
	t.Helper()
	refs := seriesRef.FindAllStringSubmatch(q, -1)
	if len(refs) == 0 {
		t.Errorf("%s: names no metric of the binary: %s", where, q)
	}
	for _, r := range refs {
		labels, ok := m[r[1]]
		if !ok {
			t.Errorf("%s: %s is not a metric the binary exports", where, r[1])
			continue
		}
		for _, l := range matcher.FindAllStringSubmatch(r[2], -1) {
			if l[1] != "__name__" && !contains(labels, l[1]) && !contains(targetLabels, l[1]) {
				t.Errorf("%s: %s has no label %q (its labels: %v)", where, r[1], l[1], labels)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// monitoring renders the chart with its alerts and dashboard on.
func monitoring(t *testing.T, extra map[string]interface{}) (rules []map[string]interface{}, groups interface{}, dashboard map[string]interface{}, args []string) {
	t.Helper()
	values := withClusterID(map[string]interface{}{
		"prometheusRule":   map[string]interface{}{"enabled": true},
		"grafanaDashboard": map[string]interface{}{"enabled": true},
	})
	mergeInto(values, extra)
	b, typed, crds, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	for _, c := range crds {
		if c["kind"] != "PrometheusRule" {
			continue
		}
		spec := c["spec"].(map[string]interface{})
		groups = spec["groups"]
		for _, g := range groups.([]interface{}) {
			for _, r := range g.(map[string]interface{})["rules"].([]interface{}) {
				rules = append(rules, r.(map[string]interface{}))
			}
		}
	}
	cm := configMap(typed, "cluster-autoscaler-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap with grafanaDashboard.enabled")
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack the sidecar's grafana_dashboard: \"1\"", cm.Labels)
	}
	if err := json.Unmarshal([]byte(cm.Data["cluster-autoscaler-digitalocean.json"]), &dashboard); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	return rules, groups, dashboard, b.Container().Args
}

// The chart's alerts page on what an operator must act on, and every metric
// they name, with every label they select on, is one the binary exports.
func TestChartAlertsNameExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := binaryMetrics(t)
	rules, _, _, args := monitoring(t, nil)
	want := []string{"ClusterAutoscalerDown", "ClusterAutoscalerNotSucceeding", "ClusterAutoscalerPendingPodsNotScaling",
		"ClusterAutoscalerScaleUpFailed", "ClusterAutoscalerNodeGroupBackoff", "ClusterAutoscalerDigitalOceanForbidden",
		"ClusterAutoscalerDigitalOceanRateLimited", "ClusterAutoscalerDigitalOceanErrors", "ClusterAutoscalerClusterUnsafe",
		"ClusterAutoscalerCreatedPoolEmpty", "ClusterAutoscalerHourlyCostNearLimit"}
	var got []string
	for _, r := range rules {
		name, _ := r["alert"].(string)
		got = append(got, name)
		exported.checkQuery(t, name, r["expr"].(string))
		ann, _ := r["annotations"].(map[string]interface{})
		if ann["summary"] == nil || !strings.Contains(toString(ann["runbook_url"]), "docs/troubleshooting.md#") {
			t.Errorf("%s: annotations %v want a summary and a runbook_url into docs/troubleshooting.md", name, ann)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("alerts %v, want %v", got, want)
	}
	// The backoff alert reads a per node group metric: the chart turns it on.
	if !contains(args, "--emit-per-nodegroup-metrics=true") {
		t.Errorf("args %v lack --emit-per-nodegroup-metrics with the alerts on", args)
	}
	// Unless the operator chose.
	_, _, _, args = monitoring(t, map[string]interface{}{"extraArgs": map[string]interface{}{"emit-per-nodegroup-metrics": false}})
	if contains(args, "--emit-per-nodegroup-metrics=true") || !contains(args, "--emit-per-nodegroup-metrics=false") {
		t.Errorf("extraArgs.emit-per-nodegroup-metrics false: args %v", args)
	}
	// The operator's own rules come after the chart's; without either the
	// group is still valid.
	rules, _, _, _ = monitoring(t, map[string]interface{}{"prometheusRule": map[string]interface{}{
		"defaultRules": map[string]interface{}{"enabled": false},
		"rules":        []interface{}{map[string]interface{}{"alert": "Mine", "expr": "vector(1)"}}}})
	if len(rules) != 1 || rules[0]["alert"] != "Mine" {
		t.Errorf("defaultRules off, one rule of mine: %v", rules)
	}
	rules, _, _, _ = monitoring(t, map[string]interface{}{"prometheusRule": map[string]interface{}{"defaultRules": map[string]interface{}{"enabled": false}}})
	if len(rules) != 0 {
		t.Errorf("no rules: %v", rules)
	}
}

func toString(v interface{}) string { s, _ := v.(string); return s }

// Every query of the dashboard names a metric the binary exports.
func TestChartDashboardNamesExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := binaryMetrics(t)
	_, _, dashboard, _ := monitoring(t, nil)
	queries := 0
	var walk func(where string, v interface{})
	walk = func(where string, v interface{}) {
		switch x := v.(type) {
		case map[string]interface{}:
			if title, ok := x["title"].(string); ok {
				where = title
			}
			if expr, ok := x["expr"].(string); ok {
				queries++
				exported.checkQuery(t, "dashboard panel "+where, expr)
			}
			for _, c := range x {
				walk(where, c)
			}
		case []interface{}:
			for _, c := range x {
				walk(where, c)
			}
		}
	}
	walk("", dashboard["panels"])
	if queries < 10 {
		t.Errorf("dashboard has %d queries", queries)
	}
	// The namespace variable is read from a metric too.
	raw, _ := json.Marshal(dashboard["templating"])
	exported.checkQuery(t, "dashboard variables", string(raw))
	// Off by default.
	_, typed, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(nil)})
	if configMap(typed, "cluster-autoscaler-dashboard") != nil {
		t.Error("dashboard ConfigMap rendered by default")
	}
}

// promtoolPath is Prometheus's promtool: $PROMTOOL, else on PATH (make puts
// bin/, with the promtool hack/tools.mk pins, first on it) or in $GOPATH/bin.
var promtoolPath = sync.OnceValue(func() string { return toolBinary("PROMTOOL", "promtool") })

// promtoolBinary is promtool; without it the alert tests fail rather than
// pass unchecked.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	if promtoolPath() == "" {
		t.Fatal("promtool not found: the alerts are tested by Prometheus's own rule tester (make bin/promtool builds the pinned one: put bin/ on PATH, or set PROMTOOL)")
	}
	return promtoolPath()
}

// The chart's alerts, as helm renders them, pass promtool's rule tests
// (testdata/alerts_test.yaml: each alert fires on the series that should page
// and stays quiet on those that should not). The test series are checked to
// be the binary's own names and labels.
func TestChartAlertsPromtool(t *testing.T) {
	t.Parallel()
	promtool := promtoolBinary(t)
	_, groups, _, _ := monitoring(t, nil)
	dir := t.TempDir()
	raw, err := yaml.Marshal(map[string]interface{}{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}

	var suite struct {
		Tests []struct {
			Name        string `json:"name"`
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &suite); err != nil {
		t.Fatal(err)
	}
	exported := binaryMetrics(t)
	for _, tc := range suite.Tests {
		for _, s := range tc.InputSeries {
			exported.checkQuery(t, "testdata/alerts_test.yaml "+tc.Name, s.Series)
		}
	}

	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// plainGauges are the metrics the binary registers as a Gauge without
// labels: the standby replica serves them too, at 0.
func plainGauges(t *testing.T) []string {
	t.Helper()
	var names []string
	metrics.RegisterAll(gaugeFinder{names: &names}, true)
	if len(names) < 5 {
		t.Fatalf("found %d plain gauges, want every one", len(names))
	}
	return names
}

// gaugeFinder is a Registerer that keeps the names of plain Gauges.
type gaugeFinder struct{ names *[]string }

func (g gaugeFinder) Register(c prometheus.Collector) error {
	if _, ok := c.(prometheus.Gauge); ok {
		ch := make(chan *prometheus.Desc, 1)
		go func() { c.Describe(ch); close(ch) }()
		for desc := range ch {
			*g.names = append(*g.names, descName.FindStringSubmatch(desc.String())[1])
		}
	}
	return nil
}
func (g gaugeFinder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = g.Register(c)
	}
}
func (g gaugeFinder) Unregister(prometheus.Collector) bool { return false }

// leaderOnly is how a query keeps the leader's series alone: the standby
// exports no last_activity.
var leaderOnly = regexp.MustCompile(`and ignoring \(activity\) cluster_autoscaler_last_activity\{[^}]*activity="main"\}`)

// Every alert and dashboard query that reads a plain gauge reads the
// leader's: with two replicas the standby's zeros would otherwise show as
// "unsafe" or "no requests left".
func TestChartMonitoringReadsPlainGaugesFromTheLeader(t *testing.T) {
	t.Parallel()
	gauges := plainGauges(t)
	rules, _, dashboard, _ := monitoring(t, nil)
	var exprs []string
	for _, r := range rules {
		exprs = append(exprs, r["expr"].(string))
	}
	raw, err := json.Marshal(dashboard["panels"])
	if err != nil {
		t.Fatal(err)
	}
	var panels []struct {
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(raw, &panels); err != nil {
		t.Fatal(err)
	}
	for _, p := range panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	read := 0
	for _, e := range exprs {
		for _, g := range gauges {
			if regexp.MustCompile(`\b` + g + `\b`).MatchString(e) {
				read++
				if !leaderOnly.MatchString(e) {
					t.Errorf("query reads the standby's %s too: %s", g, e)
				}
			}
		}
	}
	if read < 5 {
		t.Errorf("%d queries read a plain gauge, want the stats, CPU, memory, saving and the unsafe alert", read)
	}
}
