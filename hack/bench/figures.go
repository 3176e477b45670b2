package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

var ops = []string{doks.OpListNodePools, doks.OpGetNodePool, doks.OpGetNodePoolTemplate, doks.OpListSizes,
	doks.OpUpdateNodePool, doks.OpDeleteNode, doks.OpUnknown}

// runFigures starts one sandbox with c.pools autoscaled pools and measures c.binary, in
// turn: steady-state API requests, pending-pod → UpdateNodePool latency, then (after
// growing every pool to c.nodesPerPool nodes) iteration time and RSS at scale. It returns
// the figures measured, those before an error included.
func runFigures(ctx context.Context, c config, out io.Writer) (*rows, *scaleRun, error) {
	r := &rows{}
	pools := cpuPools(c.pools, c.nodesPerPool)
	t0 := time.Now()
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "sandbox"), BootDelay: c.bootDelay, Pools: pools})
	if err != nil {
		return r, nil, err
	}
	defer sb.Stop()
	fmt.Fprintf(out, "sandbox with %d pools up in %v (files in %s)\n", c.pools, time.Since(t0).Round(time.Millisecond), c.dir)
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return r, nil, err
	}
	// Fill every node, so that each trial pod needs a node of its own and the steady
	// state has pods to look at. 1500m fits once on an s-2vcpu-4gb (1900m allocatable).
	if err := createDeployment(ctx, sb, "filler", c.pools, "1500m"); err != nil {
		return r, nil, err
	}
	if err := waitRunning(ctx, sb, "filler", c.pools, c.timeout); err != nil {
		return r, nil, fmt.Errorf("filler pods: %w", err)
	}

	// Steady state: nothing to do, so every request is the cost of watching.
	ca, addr, err := startAutoscaler(c, sb, "autoscaler.log")
	if err != nil {
		return r, nil, err
	}
	defer ca.Stop(15 * time.Second)
	fmt.Fprintf(out, "autoscaler up (log %s, metrics http://%s/metrics); steady state for %v...\n", ca.LogPath, addr, c.idle)
	// The first iterations fetch templates and sizes; measure after them.
	if _, err := waitIterations(ctx, ca, addr, 2, c.timeout); err != nil {
		return r, nil, err
	}
	s0, err := alignedSnapshot(ctx, ca, sb, addr)
	if err != nil {
		return r, nil, err
	}
	if err := sleep(ctx, c.idle); err != nil {
		return r, nil, err
	}
	s1, err := alignedSnapshot(ctx, ca, sb, addr)
	if err != nil {
		return r, nil, err
	}
	iters := int(s1.m.count - s0.m.count)
	if iters == 0 {
		return r, nil, fmt.Errorf("no iteration in %v (see %s)", c.idle, ca.LogPath)
	}
	rss := procMem(ca.Cmd.Process.Pid).rss
	r.add(fmt.Sprintf("DO API requests per steady-state iteration, %d autoscaled pools", c.pools), "%s; %d iterations in %v",
		requestsPerIteration(s0, s1), iters, s1.at.Sub(s0.at).Round(time.Second))
	r.add(fmt.Sprintf("iteration time / autoscaler RSS at %d nodes", c.pools), "%v mean / %s",
		s1.m.meanSince(s0.m).Round(100*time.Microsecond), mib(rss))

	// Latency: each trial pod fits on no existing node; the trial ends when its new node
	// runs it, so the next trial again starts from a full cluster with nothing pending.
	if c.trials > 0 {
		fmt.Fprintf(out, "%d latency trials...\n", c.trials)
		var latencies []time.Duration
		missed, limited0 := 0, sb.DOKS.RateLimited("")
		for i := 0; i < c.trials; i++ {
			d, err := trial(ctx, c, sb, i)
			switch {
			case errors.Is(err, errNoUpdate):
				missed++
			case err != nil:
				return r, nil, fmt.Errorf("trial %d: %w (see %s)", i+1, err, ca.LogPath)
			default:
				latencies = append(latencies, d)
			}
		}
		r.add(fmt.Sprintf("pending pod created → UpdateNodePool, %d trials", c.trials), "%s", latencySummary(latencies, missed, sb.DOKS.RateLimited("")-limited0))
	}
	ca.Stop(15 * time.Second)

	if c.skipScale {
		r.add("scale figures", "skipped: --skip-scale")
		return r, nil, nil
	}
	sr, err := scaleFigures(ctx, c, out, sb, r)
	return r, sr, err
}

// consolidatePools tags the figures run's and the --large run's pools for
// consolidation, so that with --consolidation-enabled every node of the
// 1,000 (or 5,000) is a candidate.
var consolidatePools = flag.Bool("consolidate-pools", false, "tag the figures run's and the --large run's pools "+digitalocean.TagConsolidate+", so that consolidation (--ca-args=--consolidation-enabled) may act on every node")

// cpuPools are the figures run's pools: n autoscaled s-2vcpu-4gb pools of one node,
// room for nodesPerPool+10.
func cpuPools(n, nodesPerPool int) []doks.PoolSpec {
	var pools []doks.PoolSpec
	for i := 0; i < n; i++ {
		p := doks.PoolSpec{Name: fmt.Sprintf("pool-%02d", i+1), Size: "s-2vcpu-4gb", Count: 1,
			AutoScale: true, MinNodes: 1, MaxNodes: nodesPerPool + 10}
		if *consolidatePools {
			p.Tags = []string{digitalocean.TagConsolidate}
		}
		pools = append(pools, p)
	}
	return pools
}

// errNoUpdate says a trial's pod got no UpdateNodePool within the trial's
// minute.
var errNoUpdate = errors.New("no UpdateNodePool within a minute")

// latencySummary is the trials' figure: percentiles of those that got an UpdateNodePool,
// how many did not, and how many requests the rate limit refused meanwhile.
func latencySummary(ds []time.Duration, missed, limited int) string {
	var parts []string
	if len(ds) > 0 {
		parts = append(parts, fmt.Sprintf("p50 %v, p95 %v (min %v, max %v)",
			percentile(ds, 0.50).Round(time.Millisecond), percentile(ds, 0.95).Round(time.Millisecond),
			percentile(ds, 0).Round(time.Millisecond), percentile(ds, 1).Round(time.Millisecond)))
	}
	if missed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d trials without an UpdateNodePool within a minute", missed, len(ds)+missed))
	}
	if limited > 0 {
		parts = append(parts, fmt.Sprintf("%d requests answered 429 by the rate limit meanwhile", limited))
	}
	return strings.Join(parts, "; ")
}

// acceptedUpdates counts the UpdateNodePool requests the simulator received and did not
// refuse for the rate limit: a refused one gives no node.
func acceptedUpdates(sb *sandbox.Sandbox) int {
	return sb.DOKS.RequestCount(doks.OpUpdateNodePool) - sb.DOKS.RateLimited(doks.OpUpdateNodePool)
}

func trial(ctx context.Context, c config, sb *sandbox.Sandbox, i int) (time.Duration, error) {
	pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("trial-%02d", i+1), Namespace: "bench",
		Labels: map[string]string{"app": "trial"}}, Spec: podSpec("1500m")}
	updates0 := acceptedUpdates(sb)
	created := time.Now()
	if _, err := sb.Kube.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	var latency time.Duration
	// The count goes up when the PUT arrives, before it is handled; 2ms polling is the
	// resolution of the figure.
	// Past the minute the trial has no figure, but the pod must still run (below).
	_ = poll(ctx, time.Minute, 2*time.Millisecond, func() (bool, error) {
		if acceptedUpdates(sb) > updates0 {
			latency = time.Since(created)
			return true, nil
		}
		return false, nil
	})
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if err := waitRunning(ctx, sb, "trial", i+1, c.timeout); err != nil {
		return 0, err
	}
	if latency == 0 {
		// The pod runs after all: the next trial starts from a full cluster again.
		return 0, errNoUpdate
	}
	// Let the iteration that follows the new node's arrival pass before the next pod.
	return latency, sleep(ctx, time.Second)
}

// scaleFigures grows every pool to c.nodesPerPool nodes at once, spreads small pods over
// them and measures a fresh autoscaler's iterations and memory. It returns what it
// measured, nil when the nodes did not all register.
func scaleFigures(ctx context.Context, c config, out io.Writer, sb *sandbox.Sandbox, r *rows) (*scaleRun, error) {
	want := c.pools * c.nodesPerPool
	fmt.Fprintf(out, "growing to %d nodes...\n", want)
	nodes, took, err := growPools(ctx, sb, c.nodesPerPool, c.timeout)
	if err != nil {
		r.add("scale figures", "skipped: only %d of %d nodes registered in %v (%v)", nodes, want, c.timeout, err)
		return nil, nil
	}
	if c.smallPods > 0 {
		fmt.Fprintf(out, "%d nodes registered in %v; creating %d small pods...\n", nodes, took.Round(time.Second), c.smallPods)
		if err := createDeployment(ctx, sb, "small", c.smallPods, "50m"); err != nil {
			return nil, err
		}
		if err := waitRunning(ctx, sb, "small", c.smallPods, c.timeout); err != nil {
			fmt.Fprintf(out, "small pods: %v; measuring with what runs\n", err)
		}
	}
	pods, err := runningPodsOf(ctx, sb, "filler", "trial", "small")
	if err != nil {
		return nil, err
	}
	sr := &scaleRun{cluster: fmt.Sprintf("%d nodes in %d pools registered in %v, %d pods running", nodes, c.pools, took.Round(time.Second), pods)}
	r.add("sandbox at scale", "%s", sr.cluster)

	ca, addr, err := startAutoscaler(c, sb, "autoscaler-scale.log")
	if err != nil {
		return sr, err
	}
	defer ca.Stop(30 * time.Second)
	fmt.Fprintf(out, "autoscaler at %d nodes (log %s); measuring for %v...\n", nodes, ca.LogPath, c.window)
	sr.s, err = measureSteady(ctx, c, out, sb, ca, addr, want)
	sr.s.add(r, c, want)
	return sr, err
}

// runningPodsOf counts the running pods of these apps.
func runningPodsOf(ctx context.Context, sb *sandbox.Sandbox, apps ...string) (int, error) {
	pods := 0
	for _, app := range apps {
		n, err := runningPods(ctx, sb, app)
		if err != nil {
			return 0, err
		}
		pods += n
	}
	return pods, nil
}

// scaleRun is what the scale figures measured: the cluster (the "sandbox at scale"
// figure) and the fresh autoscaler on it.
type scaleRun struct {
	cluster string
	s       steady
}

// steady is what measureSteady measured of a freshly started autoscaler.
type steady struct {
	firstIter time.Duration // start → end of its first iteration; 0: none
	s0, s1    snapshot      // the window's ends (aligned to iteration ends)
	max       time.Duration
	mem       memory
	// cpuPerIter: the autoscaler's CPU time (user+system, all goroutines: informers,
	// /metrics) over the window divided by its iterations; on a loaded machine wall time
	// includes waiting for a core, this does not.
	cpuPerIter     time.Duration
	cpuProf, heapP string // profile files, when c.profileDir is set
}

// mean is the mean iteration time over the window; 0 when it had no iteration.
func (s steady) mean() time.Duration { return s.s1.m.meanSince(s.s0.m) }

// add puts what was measured among r's figures.
func (s steady) add(r *rows, c config, nodes int) {
	if s.firstIter == 0 {
		r.add(fmt.Sprintf("first iteration at %d nodes", nodes), "none within %v", c.timeout)
		return
	}
	r.add(fmt.Sprintf("first iteration at %d nodes", nodes), "done %v after start", s.firstIter.Round(time.Millisecond))
	iters := int(s.s1.m.count - s.s0.m.count)
	if iters <= 0 {
		return
	}
	r.add(fmt.Sprintf("iteration time at %d nodes", nodes), "%v mean, %v max (%d iterations in %v, --v=%d); %v CPU per iteration",
		s.s1.m.meanSince(s.s0.m).Round(time.Millisecond), s.max.Round(time.Millisecond), iters, s.s1.at.Sub(s.s0.at).Round(time.Second),
		c.verbosity, s.cpuPerIter.Round(time.Millisecond))
	if phases := s.s1.m.phasesSince(s.s0.m); phases != "" {
		r.add(fmt.Sprintf("parts of an iteration at %d nodes (mean)", nodes), "%s", phases)
	}
	r.add(fmt.Sprintf("autoscaler RSS at %d nodes", nodes), "%s", s.mem)
	r.add(fmt.Sprintf("anonymous memory at %d nodes (smaps_rollup)", nodes), "%s", mib(s.mem.smapsAnon))
	if s.mem.heapErr != nil {
		r.add(fmt.Sprintf("Go heap after a collection at %d nodes", nodes), "not read: %v", s.mem.heapErr)
	} else {
		r.add(fmt.Sprintf("Go heap after a collection at %d nodes", nodes), "%s in use (HeapInuse), %s of live objects (HeapAlloc)",
			mib1(s.mem.heap.inuse), mib1(s.mem.heap.alloc))
	}
	if s.mem.cg.usage > 0 {
		r.add(fmt.Sprintf("working set at %d nodes (memory cgroup)", nodes), "%s", s.mem.workingSet())
	} else if reason := cgroupReason(); reason != "" {
		r.add(fmt.Sprintf("working set at %d nodes (memory cgroup)", nodes), "not measured: %s", reason)
	}
	r.add(fmt.Sprintf("DO API requests per iteration at %d nodes", nodes), "%s", requestsPerIteration(s.s0, s.s1))
}

// requestsPerIteration is the DigitalOcean requests between two snapshots divided by the
// iterations between them, by operation, with the rate limit's refusals.
func requestsPerIteration(s0, s1 snapshot) string {
	iters := s1.m.count - s0.m.count
	if iters <= 0 {
		return "no iteration"
	}
	var parts []string
	for _, op := range ops {
		if n := s1.byOp[op] - s0.byOp[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", op, float64(n)/iters))
		}
	}
	v := fmt.Sprintf("%.2f", float64(s1.total-s0.total)/iters)
	if len(parts) > 0 {
		v += " (" + strings.Join(parts, ", ") + ")"
	}
	if n := s1.limited - s0.limited; n > 0 {
		v += fmt.Sprintf("; %d answered 429 by the rate limit", n)
	}
	return v
}

// measureSteady waits for the first iterations of an autoscaler just started, then
// measures c.window of steady iterations: their mean and max duration, the DigitalOcean
// requests they made, the RSS at the end. With c.profileDir it saves a CPU profile of the
// window and a heap profile at its end.
func measureSteady(ctx context.Context, c config, out io.Writer, sb *sandbox.Sandbox, ca *sandbox.Process, addr string, nodes int) (steady, error) {
	var s steady
	started := time.Now()
	if _, err := waitIterations(ctx, ca, addr, 1, c.timeout); err != nil {
		return s, err
	}
	s.firstIter = time.Since(started)
	if _, err := waitIterations(ctx, ca, addr, 2, c.timeout); err != nil {
		return s, err
	}
	var err error
	if s.s0, err = alignedSnapshot(ctx, ca, sb, addr); err != nil {
		return s, err
	}
	cpu0 := procCPU(ca.Cmd.Process.Pid)
	mem := watchMem(ca.Cmd.Process.Pid)
	defer mem.end() // on an early return
	profDone := make(chan error, 1)
	if c.profileDir != "" {
		s.cpuProf = filepath.Join(c.profileDir, fmt.Sprintf("cpu-%d-%s.pprof", nodes, filepath.Base(c.binary)))
		secs := max(1, int((c.window - 2*time.Second).Seconds()))
		go func() { profDone <- savePprof(addr, fmt.Sprintf("profile?seconds=%d", secs), s.cpuProf) }()
	} else {
		profDone <- nil
	}
	prev := s.s0.m
	deadline := time.Now().Add(c.window)
	for time.Now().Before(deadline) {
		// Seldom, as a Prometheus server scrapes (every 15 s to 1 min): a
		// scrape of the autoscaler's 2,000 series allocates about 200 KB
		// and costs CPU the figures would count as the loop's. Half the
		// scan interval still sees each iteration's duration on its own.
		if err := sleep(ctx, min(5*time.Second, c.scanInterval/2)); err != nil {
			return s, err
		}
		m, err := scrape(addr)
		if err != nil {
			return s, err
		}
		if m.count > prev.count {
			if d := m.meanSince(prev); d > s.max { // one iteration per scrape at most here
				s.max = d
			}
			prev = m
		}
	}
	s.s1, err = alignedSnapshot(ctx, ca, sb, addr)
	s.mem = mem.end()
	if err != nil {
		s.s1 = s.s0
		return s, err
	}
	if d := s.s1.m.meanSince(prev); s.s1.m.count > prev.count && d > s.max {
		s.max = d
	}
	if iters := int(s.s1.m.count - s.s0.m.count); iters > 0 {
		s.cpuPerIter = (procCPU(ca.Cmd.Process.Pid) - cpu0) / time.Duration(iters)
	}
	if err := <-profDone; err != nil {
		return s, fmt.Errorf("cpu profile: %w", err)
	}
	// After the window's CPU and memory: the collection it forces is not the loop's.
	s.mem.heap, s.mem.heapErr = heapAfterGC(addr)
	if c.profileDir != "" {
		s.heapP = filepath.Join(c.profileDir, fmt.Sprintf("heap-%d-%s.pprof", nodes, filepath.Base(c.binary)))
		if err := savePprof(addr, "heap?gc=1", s.heapP); err != nil {
			return s, fmt.Errorf("heap profile: %w", err)
		}
		// The text form ends with the runtime's MemStats: where the rest of the
		// anonymous memory is (stacks, GC metadata, spans kept unreleased).
		if err := savePprof(addr, "heap?debug=1", strings.TrimSuffix(s.heapP, ".pprof")+".txt"); err != nil {
			return s, fmt.Errorf("heap profile: %w", err)
		}
		fmt.Fprintf(out, "profiles: %s, %s (go tool pprof -top %s %s)\n", s.cpuProf, s.heapP, c.binary, s.cpuProf)
	}
	return s, nil
}

func savePprof(addr, what, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	client := http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Get("http://" + addr + "/debug/pprof/" + what)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/debug/pprof/%s: %s", what, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// growPools resizes every pool of sb to nodesPerPool nodes (max nodesPerPool+10) and
// waits up to timeout for all their Nodes: it returns how many registered and how long
// that took; err when not all did.
func growPools(ctx context.Context, sb *sandbox.Sandbox, nodesPerPool int, timeout time.Duration) (int, time.Duration, error) {
	begin := time.Now()
	pools := sb.DOKS.Pools()
	for _, p := range pools {
		if err := resizePool(ctx, sb, p, nodesPerPool, nodesPerPool+10); err != nil {
			return 0, 0, err
		}
	}
	want, nodes := len(pools)*nodesPerPool, 0
	// Every 2s: each poll lists (and the apiserver encodes) every Node.
	err := poll(ctx, timeout, 2*time.Second, func() (bool, error) {
		l, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		nodes = len(l.Items)
		return nodes >= want, nil
	})
	return nodes, time.Since(begin), err
}

// resizePool sets pool p's count and max through the DigitalOcean API. The harness
// spends the same token's budget as the autoscaler: when the autoscaler measured before
// has spent it, it waits for the limit as a client should (retry-after, or a minute).
func resizePool(ctx context.Context, sb *sandbox.Sandbox, p godo.KubernetesNodePool, count, maxNodes int) error {
	req := &godo.KubernetesNodePoolUpdateRequest{Name: p.Name, Count: ptr.To(count), AutoScale: ptr.To(true),
		MinNodes: ptr.To(1), MaxNodes: ptr.To(maxNodes)}
	for {
		_, resp, err := sb.GodoClient().Kubernetes.UpdateNodePool(ctx, sb.ClusterID, p.ID, req)
		if err == nil {
			return nil
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			return fmt.Errorf("resizing %s: %w", p.Name, err)
		}
		wait := time.Minute
		if s, perr := strconv.Atoi(resp.Header.Get("retry-after")); perr == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// startAutoscaler runs the binary against sb with production defaults except for what a
// sandbox needs, serving /metrics and /debug/pprof (--profiling: the heap after a
// collection, profiles with --profile-dir) on a free loopback port, with --ca-args for
// this project's builds. With --memory-cgroup (where the machine allows one) it runs in a
// memory cgroup of its own, from a fresh copy of the binary (memory.go).
func startAutoscaler(c config, sb *sandbox.Sandbox, logName string) (*sandbox.Process, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := l.Addr().String()
	l.Close()
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false",
		"--scan-interval="+c.scanInterval.String(), "--address="+addr, "--v="+strconv.Itoa(c.verbosity), "--profiling")
	args = append(args, extraArgs(c)...)
	if !*useCgroup {
		p, err := sandbox.RunAutoscaler(c.binary, args, filepath.Join(c.dir, logName))
		return p, addr, err
	}
	g, err := newMemCgroup(strings.TrimSuffix(logName, ".log"))
	if err != nil {
		cgroupNote(err)
		p, err := sandbox.RunAutoscaler(c.binary, args, filepath.Join(c.dir, logName))
		return p, addr, err
	}
	copyDir := filepath.Join(c.dir, "bin-"+filepath.Base(g.dir))
	bin, err := freshCopy(c.binary, copyDir)
	if err != nil {
		os.Remove(g.dir)
		return nil, "", err
	}
	name, wrapped := inCgroup(g, bin, args)
	p, err := sandbox.RunAutoscaler(name, wrapped, filepath.Join(c.dir, logName))
	if err != nil {
		os.Remove(g.dir)
		os.RemoveAll(copyDir)
		return nil, "", err
	}
	registerCgroup(p.Cmd.Process.Pid, g, p.Done(), copyDir)
	return p, addr, nil
}

func waitRunning(ctx context.Context, sb *sandbox.Sandbox, app string, n int, timeout time.Duration) error {
	got := 0
	// Each poll lists the pods: for thousands, in the process that runs the control
	// plane, often would slow down what it waits for.
	every := 50 * time.Millisecond
	if n > 100 {
		every = time.Second
	}
	err := poll(ctx, timeout, every, func() (bool, error) {
		var err error
		got, err = runningPods(ctx, sb, app)
		return got >= n, err
	})
	if err != nil {
		return fmt.Errorf("%d of %d %s pods running: %w", got, n, app, err)
	}
	return nil
}

// mainMetric is function_duration_seconds{function="main"}: sum in seconds and count;
// phases holds the sums of the other functions (the loop's parts), by label.
type mainMetric struct {
	sum, count float64
	phases     map[string]float64
}

// phasesSince is each part's mean time per iteration between two scrapes, longest
// first (parts that took no time left out), as "label 12ms".
func (m mainMetric) phasesSince(before mainMetric) string {
	iters := m.count - before.count
	if iters <= 0 {
		return ""
	}
	type phase struct {
		label string
		mean  time.Duration
	}
	var ps []phase
	for label, sum := range m.phases {
		if d := time.Duration((sum - before.phases[label]) / iters * float64(time.Second)); d >= time.Millisecond {
			ps = append(ps, phase{label, d})
		}
	}
	slices.SortFunc(ps, func(a, b phase) int { return cmp.Or(cmp.Compare(b.mean, a.mean), cmp.Compare(a.label, b.label)) })
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s %v", p.label, p.mean.Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

func (m mainMetric) meanSince(before mainMetric) time.Duration {
	if m.count <= before.count {
		return 0
	}
	return time.Duration((m.sum - before.sum) / (m.count - before.count) * float64(time.Second))
}

// scrapeClient is shared by every scrape: a Transport per call left one idle
// kept-alive connection (with its buffers and goroutine) in the autoscaler per scrape,
// about a thousand of them, 8 MB of its heap, by the end of a window. Uncompressed: gzip
// of every scrape would be a large share of the CPU measured.
var scrapeClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func scrape(addr string) (mainMetric, error) {
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return mainMetric{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return mainMetric{}, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return parseMainMetric(resp.Body)
}

// parseMainMetric reads cluster_autoscaler_function_duration_seconds{function="main"}'s
// sum and count from a Prometheus text exposition (both projects name it so).
func parseMainMetric(r io.Reader) (mainMetric, error) {
	var m mainMetric
	const name = "cluster_autoscaler_function_duration_seconds_"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		_, label, _ := strings.Cut(line, `function="`)
		label, _, _ = strings.Cut(label, `"`)
		switch {
		case label == "main" && strings.HasPrefix(line, name+"sum{"):
			m.sum = v
		case label == "main" && strings.HasPrefix(line, name+"count{"):
			m.count = v
		case label != "" && label != "loopWait" && strings.HasPrefix(line, name+"sum{"):
			if m.phases == nil {
				m.phases = map[string]float64{}
			}
			m.phases[label] = v
		}
	}
	return m, sc.Err()
}

// waitIterations waits until the autoscaler has finished n iterations.
func waitIterations(ctx context.Context, ca *sandbox.Process, addr string, n float64, timeout time.Duration) (mainMetric, error) {
	var m mainMetric
	err := poll(ctx, timeout, 100*time.Millisecond, func() (bool, error) {
		if !ca.Running() {
			return false, fmt.Errorf("autoscaler exited: %v (see %s)", ca.Err(), ca.LogPath)
		}
		var err error
		m, err = scrape(addr)
		return err == nil && m.count >= n, nil
	})
	if err != nil {
		return m, fmt.Errorf("waiting for %v autoscaler iterations: %w (see %s)", n, err, ca.LogPath)
	}
	return m, nil
}

// snapshot is the autoscaler's iteration metric and the simulator's request counters
// at one moment.
type snapshot struct {
	at             time.Time
	m              mainMetric
	total, limited int
	byOp           map[string]int
}

// alignedSnapshot waits for the end of the next iteration and then reads the simulator's
// request counters, so that a window between two snapshots holds whole iterations and
// exactly their requests.
func alignedSnapshot(ctx context.Context, ca *sandbox.Process, sb *sandbox.Sandbox, addr string) (snapshot, error) {
	var s snapshot
	m0, err := scrape(addr)
	if err != nil {
		return s, err
	}
	// A quarter of a second: the next iteration's first request comes a scan
	// interval (10 s) after this one started; scraping more often (it was
	// every 20 ms) made the autoscaler's memory and CPU at the window's end
	// the scrapes' as much as the loop's.
	err = poll(ctx, 10*time.Minute, 250*time.Millisecond, func() (bool, error) {
		if !ca.Running() {
			return false, fmt.Errorf("autoscaler exited (see %s)", ca.LogPath)
		}
		var err error
		s.m, err = scrape(addr)
		return err == nil && s.m.count > m0.count, nil
	})
	s.at = time.Now()
	s.byOp = map[string]int{}
	for _, op := range ops {
		s.byOp[op] = sb.DOKS.RequestCount(op)
	}
	s.total, s.limited = sb.DOKS.TotalRequests(), sb.DOKS.RateLimited("")
	return s, err
}

// procCPU reads the user+system CPU time of a process.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU is utime+stime of a /proc/<pid>/stat line, in clock ticks of 10ms.
func parseProcStatCPU(stat string) time.Duration {
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// memory is a process's resident memory, in bytes: VmRSS, VmHWM (its peak), and VmRSS's
// two parts, RssAnon (heap, stacks: the process's own) and RssFile (pages of mapped
// files, mostly the binary's code and read-only data: clean, shared with the page
// cache, reclaimable). Over a window (memWatch), mean is VmRSS's mean and hwm the
// peak within the window (since the start when the kernel refused its reset:
// peakSinceStart).
type memory struct {
	rss, hwm, anon, file, mean int64
	peakSinceStart             bool
	// smapsAnon: smaps_rollup's Anonymous at the window's end.
	smapsAnon int64
	// cg: the process's memory cgroup at the window's end (zero without one); wsMean
	// and wsPeak its working set's mean and peak over the window's samples.
	cg             cgroupMem
	wsMean, wsPeak int64
	// heap: the Go heap right after a collection forced at the window's end (zero when
	// not read); heapErr why not.
	heap    goHeap
	heapErr error
}

// workingSet is the cgroup figure as printed: end, mean and peak over the window, and
// what it is made of.
func (m memory) workingSet() string {
	return fmt.Sprintf("%s at the window's end (usage %s less inactive_file %s; active_file %s, anonymous %s); over the window mean %s, peak %s",
		mib(m.cg.workingSet()), mib(m.cg.usage), mib(m.cg.inactiveFile), mib(m.cg.activeFile), mib(m.cg.anon), mib(m.wsMean), mib(m.wsPeak))
}

// String is how the figures print it.
func (m memory) String() string {
	if m.mean == 0 {
		return fmt.Sprintf("%s (peak %s; anonymous %s, file-backed %s)", mib(m.rss), mib(m.hwm), mib(m.anon), mib(m.file))
	}
	peak := "peak"
	if m.peakSinceStart {
		peak = "peak since start"
	}
	return fmt.Sprintf("%s at the window's end (anonymous %s, file-backed %s); over the window mean %s, %s %s",
		mib(m.rss), mib(m.anon), mib(m.file), mib(m.mean), peak, mib(m.hwm))
}

// memWatch samples a process's resident memory through a window, so that the figure
// is what the process held over it and not only at its end, which comes just after an
// iteration: VmRSS every 100 ms (reads of /proc, no work of the process's), and the
// kernel's own peak (VmHWM, reset at the start through clear_refs), which sees a
// spike between two samples.
type memWatch struct {
	pid       int
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
	sum, n    int64
	resetPeak bool
	// cg: the process's memory cgroup, sampled too (nil: none).
	cg                 *memCgroup
	wsSum, wsN, wsPeak int64
}

func watchMem(pid int) *memWatch {
	w := &memWatch{pid: pid, stop: make(chan struct{}), done: make(chan struct{}), cg: cgroupOf(pid)}
	w.resetPeak = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	go func() {
		defer close(w.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if m := procMem(pid); m.rss > 0 {
				w.sum += m.rss
				w.n++
			}
			if w.cg != nil {
				if cm := w.cg.read(); cm.usage > 0 {
					ws := cm.workingSet()
					w.wsSum += ws
					w.wsN++
					w.wsPeak = max(w.wsPeak, ws)
				}
			}
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// end stops the sampling and returns the memory at the window's end with the window's
// mean and peak (the peak since the process started when it could not be reset).
func (w *memWatch) end() memory {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	m := procMem(w.pid)
	if w.n > 0 {
		m.mean = w.sum / w.n
	}
	m.peakSinceStart = !w.resetPeak
	m.smapsAnon = smapsAnon(w.pid)
	if w.cg != nil {
		m.cg = w.cg.read()
		m.wsPeak = max(w.wsPeak, m.cg.workingSet())
		if w.wsN > 0 {
			m.wsMean = w.wsSum / w.wsN
		}
	}
	return m
}

// procMem reads a process's memory from /proc/<pid>/status.
func procMem(pid int) memory {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}
	}
	return parseProcStatusMem(string(b))
}

// parseProcStatusMem reads VmRSS, VmHWM, RssAnon and RssFile from /proc/<pid>/status.
func parseProcStatusMem(status string) memory {
	var m memory
	for _, line := range strings.Split(status, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.hwm = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		case "RssFile:":
			m.file = kb << 10
		}
	}
	return m
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func mib1(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// percentile is the nearest-rank percentile of ds (q in [0,1]).
func percentile(ds []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}
