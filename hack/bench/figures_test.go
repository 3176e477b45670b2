package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func TestParseMainMetric(t *testing.T) {
	text := `# HELP cluster_autoscaler_function_duration_seconds Time taken by various parts of CA main loop.
cluster_autoscaler_function_duration_seconds_bucket{function="main",le="0.01"} 3
cluster_autoscaler_function_duration_seconds_sum{function="scaleUp"} 9.5
cluster_autoscaler_function_duration_seconds_count{function="scaleUp"} 7
cluster_autoscaler_function_duration_seconds_sum{function="main"} 1.25
cluster_autoscaler_function_duration_seconds_count{function="main"} 5
`
	m, err := parseMainMetric(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if m.sum != 1.25 || m.count != 5 {
		t.Errorf("got sum %v count %v, want the main function's 1.25 and 5", m.sum, m.count)
	}
	if m.phases["scaleUp"] != 9.5 || len(m.phases) != 1 {
		t.Errorf("phases %v, want scaleUp's sum 9.5 only", m.phases)
	}
	before := mainMetric{sum: 0.25, count: 1, phases: map[string]float64{"scaleUp": 1.5}}
	if got := m.phasesSince(before); got != "scaleUp 2s" {
		t.Errorf("phases since 1 iteration = %q, want scaleUp's 8s over 4 iterations", got)
	}
	if got := m.meanSince(mainMetric{sum: 0.25, count: 1}); got != 250*time.Millisecond {
		t.Errorf("mean since 1 iteration of 0.25s = %v, want 250ms", got)
	}
	if got := m.meanSince(m); got != 0 {
		t.Errorf("mean over no iteration = %v, want 0", got)
	}
}

func TestParseProc(t *testing.T) {
	// The command name may hold spaces and parentheses; utime and stime are fields 14 and 15.
	stat := "1234 (cluster (auto) scaler) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 25 0 0 20 0 12 0 100 0 0"
	if got := parseProcStatCPU(stat); got != 1750*time.Millisecond {
		t.Errorf("CPU of %q = %v, want 1.75s (175 ticks)", stat, got)
	}
	if got := parseProcStatCPU("garbage"); got != 0 {
		t.Errorf("CPU of garbage = %v, want 0", got)
	}
	status := "Name:\tcluster-autoscaler\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t   65536 kB\nRssFile:\t   36864 kB\nThreads:\t12\n"
	if got, want := parseProcStatusMem(status), (memory{rss: 100 << 20, hwm: 200 << 20, anon: 64 << 20, file: 36 << 20}); got != want {
		t.Errorf("memory %+v, want %+v", got, want)
	}
}

// A window's memory is sampled through it: this process's own, read as the bench reads
// the autoscaler's.
func TestMemWatch(t *testing.T) {
	w := watchMem(os.Getpid())
	ballast := make([]byte, 32<<20)
	for i := range ballast {
		ballast[i] = 1 // resident
	}
	time.Sleep(250 * time.Millisecond)
	m := w.end()
	runtime.KeepAlive(ballast)
	if m.mean <= 0 || m.rss <= 0 {
		t.Fatalf("memory %+v: no samples", m)
	}
	if m.hwm < m.rss || m.hwm < 32<<20 {
		t.Errorf("peak %d below the resident %d or the 32 MiB touched in the window", m.hwm, m.rss)
	}
	if got := m.String(); !strings.Contains(got, "over the window mean") {
		t.Errorf("printed %q, want the window's mean", got)
	}
	w.end() // a second end (the deferred one) is harmless
}

func TestPercentileAndLatencySummary(t *testing.T) {
	ds := []time.Duration{5 * time.Second, time.Second, 3 * time.Second, 2 * time.Second, 4 * time.Second}
	for q, want := range map[float64]time.Duration{0: time.Second, 0.5: 3 * time.Second, 0.95: 5 * time.Second, 1: 5 * time.Second} {
		if got := percentile(ds, q); got != want {
			t.Errorf("percentile %v = %v, want %v", q, got, want)
		}
	}
	if ds[0] != 5*time.Second {
		t.Error("percentile sorted its argument")
	}
	got := latencySummary(ds, 2, 17)
	for _, want := range []string{"p50 3s", "p95 5s", "2 of 7 trials without an UpdateNodePool", "17 requests answered 429"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if got := latencySummary(nil, 3, 0); got != "3 of 3 trials without an UpdateNodePool within a minute" {
		t.Errorf("no trial got an update: %q", got)
	}
}

func TestRequestsPerIteration(t *testing.T) {
	s0 := snapshot{m: mainMetric{count: 10}, total: 100, limited: 4,
		byOp: map[string]int{doks.OpListNodePools: 50, doks.OpGetNodePoolTemplate: 50}}
	s1 := snapshot{m: mainMetric{count: 14}, total: 184, limited: 10,
		byOp: map[string]int{doks.OpListNodePools: 54, doks.OpGetNodePoolTemplate: 130}}
	want := "21.00 (ListNodePools 1.00, GetNodePoolTemplate 20.00); 6 answered 429 by the rate limit"
	if got := requestsPerIteration(s0, s1); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := requestsPerIteration(s1, s1); got != "no iteration" {
		t.Errorf("no iteration between snapshots: %q", got)
	}
}

func TestPrintTableSideBySide(t *testing.T) {
	ours, upstream := &rows{}, &rows{}
	ours.add("iteration time", "%d ms", 30)
	ours.add("RSS", "100 MiB")
	upstream.add("iteration time", "2 s")
	upstream.add("run ended early", "429")
	var b strings.Builder
	if err := printTable(&b, "figure", []string{"ours", "upstream"}, []*rows{ours, upstream}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{{"figure", "ours", "upstream"}, {"iteration time", "30 ms", "2 s"}, {"RSS", "100 MiB", "—"}, {"run ended early", "—", "429"}}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w[0]) || !strings.Contains(lines[i], w[1]) || !strings.HasSuffix(lines[i], w[2]) {
			t.Errorf("line %d %q, want %v", i, lines[i], w)
		}
	}
}

func TestDRARatios(t *testing.T) {
	window := func(sum float64, cpu time.Duration, rss int64) steady {
		return steady{s0: snapshot{m: mainMetric{count: 2}}, s1: snapshot{m: mainMetric{sum: sum, count: 6}}, cpuPerIter: cpu, mem: memory{rss: rss}}
	}
	plain, dra := window(0.4, 200*time.Millisecond, 100<<20), window(0.5, 300*time.Millisecond, 110<<20)
	if got, want := draRatios(plain, dra), "mean iteration time 1.25x, CPU per iteration 1.50x, RSS 1.10x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := draRatios(steady{}, dra), "mean iteration time —, CPU per iteration —, RSS —"; got != want {
		t.Errorf("nothing measured without claims: got %q, want %q", got, want)
	}
}

func TestCheckDRA(t *testing.T) {
	c := config{dra: true, pools: 20, nodesPerPool: 50, draGPUNodes: 100, draClaimPods: 300}
	if err := c.checkDRA(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, bad := range []config{
		{dra: true, pools: 20, nodesPerPool: 50, draGPUNodes: 120, draClaimPods: 300}, // not whole pools
		{dra: true, pools: 2, nodesPerPool: 50, draGPUNodes: 100, draClaimPods: 300},  // no CPU pool left
		{dra: true, pools: 20, nodesPerPool: 50, draGPUNodes: 50, draClaimPods: 401},  // more claims than GPUs
		{dra: true, pools: 20, nodesPerPool: 50, draGPUNodes: 0, draClaimPods: 0},     // no GPU node
	} {
		if err := bad.checkDRA(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := (config{pools: 1, nodesPerPool: 50, draGPUNodes: 120}).checkDRA(); err != nil {
		t.Errorf("without --dra the DRA flags are not checked: %v", err)
	}
}
