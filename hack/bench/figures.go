package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// figures are what runFigures measured.
type figures struct {
	// Steady state with c.pools pools of one (full) node each.
	steadyRequests, steadyIters int
	steadyByOp                  map[string]int
	steadyWindow                time.Duration
	smallIterMean               time.Duration
	smallRSS                    int64
	// Pending pod created → UpdateNodePool received.
	latencies []time.Duration
	// At scale.
	scaleNodes, scalePods int
	scaleRegister         time.Duration
	scale                 steady
	scaleSkipped          string
}

var ops = []string{doks.OpListNodePools, doks.OpGetNodePool, doks.OpGetNodePoolTemplate, doks.OpListSizes,
	doks.OpUpdateNodePool, doks.OpDeleteNode, doks.OpUnknown}

func (f *figures) print(w io.Writer, c config) {
	perIter := func(n int) float64 { return float64(n) / float64(f.steadyIters) }
	var parts []string
	for _, op := range ops {
		if n := f.steadyByOp[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", op, perIter(n)))
		}
	}
	fmt.Fprintf(w, "DO API requests per steady-state iteration, %d autoscaled pools\t%.2f (%s): %d requests / %d iterations in %v, --scan-interval=%v\n",
		c.pools, perIter(f.steadyRequests), strings.Join(parts, ", "), f.steadyRequests, f.steadyIters, f.steadyWindow.Round(time.Second), c.scanInterval)
	fmt.Fprintf(w, "iteration time / autoscaler RSS at %d nodes\t%v mean / %s\n", c.pools, f.smallIterMean.Round(100*time.Microsecond), mib(f.smallRSS))
	if n := len(f.latencies); n > 0 {
		fmt.Fprintf(w, "pending pod created → UpdateNodePool, %d trials\tp50 %v, p95 %v (min %v, max %v); --pending-pods-batch-idle=1s (default)\n", n,
			percentile(f.latencies, 0.50).Round(time.Millisecond), percentile(f.latencies, 0.95).Round(time.Millisecond),
			percentile(f.latencies, 0).Round(time.Millisecond), percentile(f.latencies, 1).Round(time.Millisecond))
	}
	if f.scaleSkipped != "" {
		fmt.Fprintf(w, "scale figures\tskipped: %s\n", f.scaleSkipped)
		return
	}
	fmt.Fprintf(w, "sandbox at scale\t%d nodes in %d pools registered in %v, %d pods running\n",
		f.scaleNodes, c.pools, f.scaleRegister.Round(time.Second), f.scalePods)
	fmt.Fprintf(w, "first iteration at %d nodes\tdone %v after start\n", f.scaleNodes, f.scale.firstIter.Round(time.Millisecond))
	f.scale.print(w, c, f.scaleNodes)
}

// runFigures starts one sandbox with c.pools autoscaled pools and measures, in turn:
// steady-state API requests, pending-pod → UpdateNodePool latency, then (after growing
// every pool to c.nodesPerPool nodes) iteration time and RSS at scale. It prints the
// table before the sandbox is torn down, whose shutdown logs would otherwise come first.
func runFigures(ctx context.Context, c config, out io.Writer) error {
	f := &figures{}
	var pools []doks.PoolSpec
	for i := 0; i < c.pools; i++ {
		pools = append(pools, doks.PoolSpec{Name: fmt.Sprintf("pool-%02d", i+1), Size: "s-2vcpu-4gb", Count: 1,
			AutoScale: true, MinNodes: 1, MaxNodes: c.nodesPerPool + 10})
	}
	t0 := time.Now()
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "sandbox"), BootDelay: c.bootDelay, Pools: pools})
	if err != nil {
		return err
	}
	defer sb.Stop()
	fmt.Fprintf(out, "sandbox with %d pools up in %v (files in %s)\n", c.pools, time.Since(t0).Round(time.Millisecond), c.dir)
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return err
	}
	// Fill every node, so that each trial pod needs a node of its own and the steady
	// state has pods to look at. 1500m fits once on an s-2vcpu-4gb (1900m allocatable).
	if err := createDeployment(ctx, sb, "filler", c.pools, "1500m"); err != nil {
		return err
	}
	if err := waitRunning(ctx, sb, "filler", c.pools, c.timeout); err != nil {
		return fmt.Errorf("filler pods: %w", err)
	}

	// Steady state: nothing to do, so every request is the cost of watching.
	ca, addr, err := startAutoscaler(c, sb, "autoscaler.log", false)
	if err != nil {
		return err
	}
	defer ca.Stop(15 * time.Second)
	fmt.Fprintf(out, "autoscaler up (log %s, metrics http://%s/metrics); steady state for %v...\n", ca.LogPath, addr, c.idle)
	// The first iterations fetch templates and sizes; measure after them.
	if _, err := waitIterations(ctx, ca, addr, 2, c.timeout); err != nil {
		return err
	}
	m0, req0, byOp0, err := alignedSnapshot(ctx, ca, sb, addr)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := sleep(ctx, c.idle); err != nil {
		return err
	}
	m1, req1, byOp1, err := alignedSnapshot(ctx, ca, sb, addr)
	if err != nil {
		return err
	}
	f.steadyWindow = time.Since(start)
	f.steadyIters, f.steadyRequests = int(m1.count-m0.count), req1-req0
	f.steadyByOp = map[string]int{}
	for op, n := range byOp1 {
		f.steadyByOp[op] = n - byOp0[op]
	}
	f.smallIterMean = m1.meanSince(m0)
	f.smallRSS, _ = procMem(ca.Cmd.Process.Pid)
	if f.steadyIters == 0 {
		return fmt.Errorf("no iteration in %v (see %s)", c.idle, ca.LogPath)
	}

	// Latency: each trial pod fits on no existing node; the trial ends when its new node
	// runs it, so the next trial again starts from a full cluster with nothing pending.
	if c.trials > 0 {
		fmt.Fprintf(out, "%d latency trials...\n", c.trials)
	}
	for i := 0; i < c.trials; i++ {
		d, err := trial(ctx, c, sb, i)
		if err != nil {
			return fmt.Errorf("trial %d: %w (see %s)", i+1, err, ca.LogPath)
		}
		f.latencies = append(f.latencies, d)
	}
	ca.Stop(15 * time.Second)

	if c.skipScale {
		f.scaleSkipped = "--skip-scale"
	} else if err := scaleFigures(ctx, c, out, sb, f); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nfigure\tvalue\n")
	f.print(w, c)
	return w.Flush()
}

func trial(ctx context.Context, c config, sb *sandbox.Sandbox, i int) (time.Duration, error) {
	pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("trial-%02d", i+1), Namespace: "bench",
		Labels: map[string]string{"app": "trial"}}, Spec: podSpec("1500m")}
	updates0 := sb.DOKS.RequestCount(doks.OpUpdateNodePool)
	created := time.Now()
	if _, err := sb.Kube.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	var latency time.Duration
	// RequestCount goes up when the PUT arrives, before it is handled; 2ms polling is the
	// resolution of the figure.
	err := poll(ctx, time.Minute, 2*time.Millisecond, func() (bool, error) {
		if sb.DOKS.RequestCount(doks.OpUpdateNodePool) > updates0 {
			latency = time.Since(created)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("no UpdateNodePool: %w", err)
	}
	if err := waitRunning(ctx, sb, "trial", i+1, c.timeout); err != nil {
		return 0, err
	}
	// Let the iteration that follows the new node's arrival pass before the next pod.
	return latency, sleep(ctx, time.Second)
}

// scaleFigures grows every pool to c.nodesPerPool nodes at once, spreads small pods over
// them and measures a fresh autoscaler's iterations and memory.
func scaleFigures(ctx context.Context, c config, out io.Writer, sb *sandbox.Sandbox, f *figures) error {
	want := c.pools * c.nodesPerPool
	fmt.Fprintf(out, "growing to %d nodes...\n", want)
	var err error
	f.scaleNodes, f.scaleRegister, err = growPools(ctx, sb, c.nodesPerPool, c.timeout)
	if err != nil {
		f.scaleSkipped = fmt.Sprintf("only %d of %d nodes registered in %v", f.scaleNodes, want, c.timeout)
		return nil
	}
	if c.smallPods > 0 {
		fmt.Fprintf(out, "%d nodes registered in %v; creating %d small pods...\n", f.scaleNodes, f.scaleRegister.Round(time.Second), c.smallPods)
		if err := createDeployment(ctx, sb, "small", c.smallPods, "50m"); err != nil {
			return err
		}
		if err := waitRunning(ctx, sb, "small", c.smallPods, c.timeout); err != nil {
			fmt.Fprintf(out, "small pods: %v; measuring with what runs\n", err)
		}
	}
	for _, app := range []string{"filler", "trial", "small"} {
		n, err := runningPods(ctx, sb, app)
		if err != nil {
			return err
		}
		f.scalePods += n
	}

	ca, addr, err := startAutoscaler(c, sb, "autoscaler-scale.log", c.profileDir != "")
	if err != nil {
		return err
	}
	defer ca.Stop(30 * time.Second)
	fmt.Fprintf(out, "autoscaler at %d nodes (log %s); measuring for %v...\n", f.scaleNodes, ca.LogPath, c.window)
	s, err := measureSteady(ctx, c, out, sb, ca, addr, f.scaleNodes)
	if err != nil {
		return err
	}
	f.scale = s
	return nil
}

// steady is what measureSteady measured of a freshly started autoscaler.
type steady struct {
	firstIter time.Duration // start → end of its first iteration
	iters     int
	requests  int // DigitalOcean requests during those iterations
	mean, max time.Duration
	rss, hwm  int64
	// cpuPerIter: the autoscaler's CPU time (user+system, all goroutines: informers,
	// /metrics) over the window divided by its iterations; on a loaded machine wall time
	// includes waiting for a core, this does not.
	cpuPerIter     time.Duration
	cpuProf, heapP string // profile files, when c.profileDir is set
}

func (s steady) print(w io.Writer, c config, nodes int) {
	fmt.Fprintf(w, "iteration time at %d nodes\t%v mean, %v max (%d iterations in %v, --v=%d); %v CPU per iteration\n",
		nodes, s.mean.Round(time.Millisecond), s.max.Round(time.Millisecond), s.iters, c.window, c.verbosity, s.cpuPerIter.Round(time.Millisecond))
	fmt.Fprintf(w, "autoscaler RSS at %d nodes\t%s (peak %s)\n", nodes, mib(s.rss), mib(s.hwm))
	if s.iters > 0 {
		fmt.Fprintf(w, "DO API requests per iteration at %d nodes\t%.2f\n", nodes, float64(s.requests)/float64(s.iters))
	}
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
	m0, req0, _, err := alignedSnapshot(ctx, ca, sb, addr)
	if err != nil {
		return s, err
	}
	cpu0 := procCPU(ca.Cmd.Process.Pid)
	profDone := make(chan error, 1)
	if c.profileDir != "" {
		s.cpuProf = filepath.Join(c.profileDir, fmt.Sprintf("cpu-%d.pprof", nodes))
		secs := max(1, int((c.window - 2*time.Second).Seconds()))
		go func() { profDone <- savePprof(addr, fmt.Sprintf("profile?seconds=%d", secs), s.cpuProf) }()
	} else {
		profDone <- nil
	}
	prev := m0
	deadline := time.Now().Add(c.window)
	for time.Now().Before(deadline) {
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return s, err
		}
		m, err := scrape(addr)
		if err != nil {
			return s, err
		}
		if m.count > prev.count {
			if d := m.meanSince(prev); d > s.max { // one iteration per 200ms at most here
				s.max = d
			}
			prev = m
		}
	}
	m1, req1, _, err := alignedSnapshot(ctx, ca, sb, addr)
	if err != nil {
		return s, err
	}
	if d := m1.meanSince(prev); m1.count > prev.count && d > s.max {
		s.max = d
	}
	s.iters, s.requests = int(m1.count-m0.count), req1-req0
	s.mean = m1.meanSince(m0)
	if s.iters > 0 {
		s.cpuPerIter = (procCPU(ca.Cmd.Process.Pid) - cpu0) / time.Duration(s.iters)
	}
	s.rss, s.hwm = procMem(ca.Cmd.Process.Pid)
	if err := <-profDone; err != nil {
		return s, fmt.Errorf("cpu profile: %w", err)
	}
	if c.profileDir != "" {
		s.heapP = filepath.Join(c.profileDir, fmt.Sprintf("heap-%d.pprof", nodes))
		if err := savePprof(addr, "heap?gc=1", s.heapP); err != nil {
			return s, fmt.Errorf("heap profile: %w", err)
		}
		fmt.Fprintf(out, "profiles: %s, %s (go tool pprof -top %s %s)\n", s.cpuProf, s.heapP, c.binary, s.cpuProf)
	}
	return s, nil
}

// savePprof saves the autoscaler's /debug/pprof/<what> to path.
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
	gc := sb.GodoClient()
	begin := time.Now()
	pools := sb.DOKS.Pools()
	for _, p := range pools {
		req := &godo.KubernetesNodePoolUpdateRequest{Name: p.Name, Count: ptr.To(nodesPerPool), AutoScale: ptr.To(true),
			MinNodes: ptr.To(1), MaxNodes: ptr.To(nodesPerPool + 10)}
		if _, _, err := gc.Kubernetes.UpdateNodePool(ctx, sb.ClusterID, p.ID, req); err != nil {
			return 0, 0, fmt.Errorf("resizing %s: %w", p.Name, err)
		}
	}
	want, nodes := len(pools)*nodesPerPool, 0
	err := poll(ctx, timeout, time.Second, func() (bool, error) {
		l, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		nodes = len(l.Items)
		return nodes >= want, nil
	})
	return nodes, time.Since(begin), err
}

// startAutoscaler runs the binary against sb with production defaults except for what a
// sandbox needs, serving /metrics on a free loopback port.
func startAutoscaler(c config, sb *sandbox.Sandbox, logName string, profiling bool) (*sandbox.Process, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := l.Addr().String()
	l.Close()
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false",
		"--scan-interval="+c.scanInterval.String(), "--address="+addr, "--v="+strconv.Itoa(c.verbosity))
	if profiling {
		args = append(args, "--profiling")
	}
	p, err := sandbox.RunAutoscaler(c.binary, args, filepath.Join(c.dir, logName))
	return p, addr, err
}

func waitRunning(ctx context.Context, sb *sandbox.Sandbox, app string, n int, timeout time.Duration) error {
	got := 0
	err := poll(ctx, timeout, 50*time.Millisecond, func() (bool, error) {
		var err error
		got, err = runningPods(ctx, sb, app)
		return got >= n, err
	})
	if err != nil {
		return fmt.Errorf("%d of %d %s pods running: %w", got, n, app, err)
	}
	return nil
}

// mainMetric is function_duration_seconds{function="main"}: sum in seconds and count.
type mainMetric struct{ sum, count float64 }

func (m mainMetric) meanSince(before mainMetric) time.Duration {
	if m.count <= before.count {
		return 0
	}
	return time.Duration((m.sum - before.sum) / (m.count - before.count) * float64(time.Second))
}

func scrape(addr string) (mainMetric, error) {
	var m mainMetric
	// Uncompressed: gzip of every scrape would be a large share of the CPU measured.
	client := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("/metrics: %s", resp.Status)
	}
	const name = "cluster_autoscaler_function_duration_seconds_"
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, `function="main"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, name+"sum{"):
			m.sum = v
		case strings.HasPrefix(line, name+"count{"):
			m.count = v
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

// alignedSnapshot waits for the end of the next iteration and then reads the simulator's
// request counters, so that a window between two snapshots holds whole iterations and
// exactly their requests.
func alignedSnapshot(ctx context.Context, ca *sandbox.Process, sb *sandbox.Sandbox, addr string) (mainMetric, int, map[string]int, error) {
	m0, err := scrape(addr)
	if err != nil {
		return m0, 0, nil, err
	}
	m, err := func() (mainMetric, error) {
		var m mainMetric
		err := poll(ctx, 10*time.Minute, 20*time.Millisecond, func() (bool, error) {
			if !ca.Running() {
				return false, fmt.Errorf("autoscaler exited (see %s)", ca.LogPath)
			}
			var err error
			m, err = scrape(addr)
			return err == nil && m.count > m0.count, nil
		})
		return m, err
	}()
	byOp := map[string]int{}
	for _, op := range ops {
		byOp[op] = sb.DOKS.RequestCount(op)
	}
	return m, sb.DOKS.TotalRequests(), byOp, err
}

// procCPU reads the user+system CPU time of a process (clock ticks of 10ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// procMem reads VmRSS and VmHWM (peak RSS) of a process, in bytes.
func procMem(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
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
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

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
