// Command bench measures the autoscaler end to end on the local DOKS sandbox and prints
// the figures docs/benchmarks.md quotes:
//
//   - DigitalOcean API requests per steady-state iteration with many autoscaled pools,
//
//   - the latency from a pending pod being created to the UpdateNodePool request that
//     gives it a node (p50/p95 over several trials),
//
//   - iteration time and resident memory of the autoscaler at 1,000 nodes.
//
//   - with --large, the same at 5,000 nodes in 100 pools with 10,000 pods, and the latency
//     from 5,000 pending pods to the first UpdateNodePool.
//
//   - with --dra, the same 1,000 nodes again in a sandbox in DRA mode: 100 of them GPU
//     nodes publishing ResourceSlices and 300 more pods each holding an allocated
//     ResourceClaim, beside the plain figures with the ratios (issue 23).
//
//   - the idle-cluster scale-down: time to every pool's min and DigitalOcean requests, for
//     empty nodes (20 pools × 10) and for nodes that must be drained first (under a PDB).
//
// With --burst it also runs the older burst and scale-down scenario.
//
// With --chaos it runs only the chaos scenario (chaos.go, `make chaos`): pools on demand
// under workload churn, writes applied but answered 504 or cut, listing lag and a leader
// killed at mid-run; it exits non-zero when one of its bad figures is not zero.
//
// With --consolidation it runs only the consolidation scenario (consolidation.go, `make
// consolidation`): a workload grown across several sizes and shrunk to a third, the
// settled cluster's price against a lower bound, with consolidation off and on and
// upstream's binary; it exits non-zero on a PDB violated or a pod evicted twice.
//
//	CA_BINARY=bin/cluster-autoscaler go run ./hack/bench [--pools 20 --trials 20 ...]
//
// With --upstream-binary=PATH the figures run, the scale-down runs and the --large scenario
// also run a second autoscaler binary (upstream's) with the same flags, and print both:
// the figures run and each scale-down run build an identical sandbox for each binary
// (each starts with a fresh rate-limit budget); --large measures both on the one cluster
// it builds, set back between them. --also-binary=NAME=PATH (repeatable) adds more
// binaries after upstream's in the same runs: the same binary under another environment
// (a script that sets GOGC and execs it), or an older build. The buffer and burst
// scenarios run this project's binary only.
//
// Apart from --chaos and --consolidation it asserts nothing: it reports. The autoscaler runs as its own process, so its RSS and
// its /metrics are its own; the control plane, simulator and node agent live in this one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	_ "net/http/pprof" // --pprof-addr
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
)

type config struct {
	// Figures run.
	pools, trials, nodesPerPool, smallPods int
	scanInterval, bootDelay                time.Duration
	idle, window, timeout                  time.Duration
	verbosity                              int
	figures, skipScale                     bool
	// Idle-cluster scale-down runs (--scale-down).
	scaleDown                         bool
	sdPools, sdNodesPerPool           int
	sdDrainPools, sdDrainNodesPerPool int
	sdTimeline                        bool
	// Warm-capacity run (--buffer).
	buffer          bool
	bufferBootDelay time.Duration
	// Burst run (--burst).
	burst                      bool
	burstPools, pods, maxPerPl int
	burstScan, unneeded        time.Duration
	dir, binary                string
	// pprofAddr: where this process serves net/http/pprof; empty: nowhere.
	pprofAddr string
	// upstream: a second autoscaler binary run beside CA_BINARY (--upstream-binary).
	upstream string
	// also: more binaries run after upstream's, each NAME=PATH (--also-binary): the same
	// binary under another environment, or an older build, measured in the same run.
	also multiFlag
	// builds are the binaries the figures and --large runs measure, in table order.
	builds []build
	// profileDir: where the scale runs save the autoscaler's CPU profile (over the
	// measurement window) and heap profile (at its end); empty: no profiling.
	profileDir string
	// The 5,000-node scenario (--large).
	large                                                  bool
	largePools, largeNodesPerPool, largePods, largePending int
	largeTimeout                                           time.Duration
	// largeSchedulerBinds: kube-scheduler binds the running pods (else the harness does).
	largeSchedulerBinds bool
	// The scale figures again with GPU nodes and claim pods (--dra).
	dra                       bool
	draGPUNodes, draClaimPods int
	// The chaos run alone (--chaos).
	chaosRun bool
	chaos    chaosConfig
	// The consolidation run alone (--consolidation).
	consolidationRun bool
	consolidation    consolidationConfig
	// The compressed day alone (--diurnal).
	diurnalRun bool
	diurnal    diurnalConfig
	// The capacity and money scenarios (--capacity).
	capacity bool
	// capacityOnly lists the capacity scenarios to run (their numbers); all when empty.
	capacityOnly string
}

func main() {
	var c config
	flag.IntVar(&c.pools, "pools", 20, "autoscaled node pools of the figures run")
	flag.IntVar(&c.trials, "trials", 20, "pending-pod → UpdateNodePool latency trials")
	flag.IntVar(&c.nodesPerPool, "nodes-per-pool", 50, "nodes per pool for the scale figures (pools × this nodes)")
	flag.IntVar(&c.smallPods, "small-pods", 2000, "small pods spread over the nodes for the scale figures (0: none)")
	flag.BoolVar(&c.skipScale, "skip-scale", false, "skip the iteration-time/RSS figures at scale")
	flag.DurationVar(&c.scanInterval, "scan-interval", 10*time.Second, "autoscaler --scan-interval of the figures run (its default)")
	flag.DurationVar(&c.bootDelay, "boot-delay", time.Second, "simulated droplet boot time")
	flag.DurationVar(&c.idle, "idle", 40*time.Second, "steady-state window for counting API requests")
	flag.DurationVar(&c.window, "window", 40*time.Second, "window for iteration time at scale")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up on a phase after this long")
	flag.IntVar(&c.verbosity, "ca-v", 2, "autoscaler --v")
	flag.BoolVar(&c.figures, "figures", true, "run the request, latency and scale figures")
	flag.BoolVar(&c.scaleDown, "scale-down", true, "run the idle-cluster scale-down scenarios (empty nodes, and nodes to drain)")
	flag.IntVar(&c.sdPools, "scale-down-pools", 20, "scale-down, empty nodes: pools (0 skips the run)")
	flag.IntVar(&c.sdNodesPerPool, "scale-down-nodes-per-pool", 10, "scale-down, empty nodes: nodes per pool at the start (min 1)")
	flag.IntVar(&c.sdDrainPools, "scale-down-drain-pools", 4, "scale-down with drain: pools (0 skips the run)")
	flag.IntVar(&c.sdDrainNodesPerPool, "scale-down-drain-nodes-per-pool", 4, "scale-down with drain: nodes per pool at the start, one pod each under a PDB (min 1)")
	flag.BoolVar(&c.sdTimeline, "scale-down-timeline", true, "scale-down, empty nodes: print each node's taint, end of the delay after taint and deletion, and each batch's gap to the next batch's first taint")
	flag.BoolVar(&c.burst, "burst", false, "also run the burst and scale-down scenario")
	flag.IntVar(&c.burstPools, "burst-pools", 10, "burst: autoscaled node pools (each starts at 1 node, min 1)")
	flag.IntVar(&c.pods, "burst-pods", 60, "burst: pods in the burst; each needs a node of its own")
	flag.IntVar(&c.maxPerPl, "burst-max-per-pool", 10, "burst: max_nodes of each pool")
	flag.DurationVar(&c.burstScan, "burst-scan-interval", 2*time.Second, "burst: autoscaler --scan-interval")
	flag.DurationVar(&c.unneeded, "burst-scale-down-unneeded-time", 10*time.Second, "burst: autoscaler --scale-down-unneeded-time")
	flag.StringVar(&c.profileDir, "profile-dir", "", "run the autoscaler at scale with --profiling and save cpu-<nodes>.pprof (the measurement window) and heap-<nodes>.pprof (its end) here")
	flag.BoolVar(&c.large, "large", false, "also run the 5,000-node scenario (pools × nodes per pool, running pods filling them, then pending pods)")
	flag.IntVar(&c.largePools, "large-pools", 100, "large: autoscaled pools")
	flag.IntVar(&c.largeNodesPerPool, "large-nodes-per-pool", 50, "large: nodes per pool")
	flag.IntVar(&c.largePods, "large-pods", 10000, "large: running pods of 900m (two fill a node)")
	flag.IntVar(&c.largePending, "large-pending", 5000, "large: pending pods of 500m created at once after the steady window")
	flag.BoolVar(&c.largeSchedulerBinds, "large-scheduler-binds", false, "large: kube-scheduler binds the running pods too (by default the harness binds them, two a node: the scheduler bound 3-18 a second on this shared machine); the pending pods always go through the scheduler")
	flag.DurationVar(&c.largeTimeout, "large-timeout", 20*time.Minute, "large: give up registering the nodes or running the pods after this long")
	flag.BoolVar(&c.dra, "dra", false, "after the figures run, measure the scale figures again on a cluster in DRA mode: the same pools × nodes per pool, of which --dra-gpu-nodes are gpu-h100x8-640gb nodes publishing ResourceSlices, the same pods plus --dra-claim-pods pods each holding an allocated ResourceClaim; printed beside the plain figures with the ratios")
	flag.IntVar(&c.draGPUNodes, "dra-gpu-nodes", 100, "dra: GPU nodes among the pools × nodes per pool (a multiple of --nodes-per-pool: whole pools)")
	flag.IntVar(&c.draClaimPods, "dra-claim-pods", 300, "dra: pods each claiming one GPU through a ResourceClaimTemplate")
	flag.BoolVar(&c.buffer, "buffer", true, "run the warm-capacity figure: a Deployment's new pods to Running, without and with a CapacityBuffer")
	flag.DurationVar(&c.bufferBootDelay, "buffer-boot-delay", 20*time.Second, "buffer: simulated droplet boot time")
	flag.StringVar(&c.pprofAddr, "pprof-addr", "", "serve this process's pprof (it runs the sandbox: apiserver, etcd, scheduler, controllers, node agent) on this loopback address, e.g. 127.0.0.1:6061")
	flag.Var(&c.also, "also-binary", "NAME=PATH: also run this binary (e.g. a script running CA_BINARY under GOGC=100, or an older build) wherever --upstream-binary runs, after it; repeatable")
	flag.StringVar(&c.upstream, "upstream-binary", "", "also run this autoscaler binary (e.g. upstream 1.36.1 built with -tags digitalocean) in the figures, scale-down and --large runs, same flags and cluster, and print both side by side")
	flag.BoolVar(&c.chaosRun, "chaos", false, "run the chaos scenario alone (issue 31): pools on demand under workload churn, a share of the writes applied then lost, listing lag, the leader killed at mid-run; exits non-zero when a bad figure is not zero")
	flag.DurationVar(&c.chaos.duration, "chaos-duration", 10*time.Minute, "chaos: how long the workloads churn (the wind-down after it is not counted)")
	flag.Uint64Var(&c.chaos.seed, "chaos-seed", 31, "chaos: seed of the churn and of which writes are faulted")
	flag.Float64Var(&c.chaos.faultShare, "chaos-fault-share", 0.2, "chaos: share of the writes (create, update, delete pool; delete node) applied then answered 504 (half) or cut unanswered (half)")
	flag.DurationVar(&c.chaos.listLag, "chaos-list-lag", 3*time.Second, "chaos: how long a created pool stays out of DigitalOcean's listings")
	flag.BoolVar(&c.consolidationRun, "consolidation", false, "run the consolidation scenario alone (issue 34): pools on demand, a workload grown across several sizes then shrunk to a third; this project's binary with consolidation off and on, and --upstream-binary's; prints price against a lower bound, evictions and PDB violations, and exits non-zero on a bad safety figure")
	flag.DurationVar(&c.consolidation.settle, "consolidation-settle", 3*time.Minute, "consolidation: the cluster has settled when neither nodes nor pods changed for this long")
	flag.DurationVar(&c.consolidation.timeout, "consolidation-timeout", 20*time.Minute, "consolidation: limit of the growth and of the settling")
	flag.StringVar(&c.consolidation.modes, "consolidation-modes", "off,on", "consolidation: this project's runs, with consolidation off, on or both (upstream's runs when --upstream-binary is given)")
	flag.BoolVar(&c.diurnalRun, "diurnal", false, "run the compressed day alone (issue 40, diurnal.go): Deployments following daily curves on three pools of three sizes, every duration flag scaled by --diurnal-compression; this project's binary with consolidation off and on, and --upstream-binary's; prints evictions per pod per day and their causes, bill over the day against its lower bound, samples with pending pods, the steady stretch's evictions and a churn timeline")
	flag.Float64Var(&c.diurnal.compression, "diurnal-compression", 120, "diurnal: how many times faster than real the day runs (120: a day in 12 minutes)")
	flag.Uint64Var(&c.diurnal.seed, "diurnal-seed", 40, "diurnal: seed of the load's noise")
	flag.Float64Var(&c.diurnal.noise, "diurnal-noise", 0.1, "diurnal: relative standard deviation of each 10-minute step's replicas")
	flag.StringVar(&c.diurnal.modes, "diurnal-modes", "off,on", "diurnal: this project's runs, comma-separated: consolidation off, on, or on+cost (on with --pod-deletion-cost-on-unneeded-nodes); upstream's when --upstream-binary is given")
	flag.DurationVar(&c.diurnal.warmup, "diurnal-warmup", 6*time.Hour, "diurnal: day time the load follows its curve before the measured day (from 18:00 the day before by default), so that the day starts on the cluster the autoscaler left")
	flag.DurationVar(&c.diurnal.steady, "diurnal-steady", 3*time.Hour, "diurnal: day time the load is held after the day")
	flag.DurationVar(&c.diurnal.steadySettle, "diurnal-steady-settle", time.Hour, "diurnal: evictions in the steady stretch are counted after this day time")
	flag.DurationVar(&c.diurnal.rebuy, "diurnal-rebuy-window", 30*time.Minute, "diurnal: a drain is churn when its pool buys a node within this day time after it began")
	flag.BoolVar(&c.capacity, "capacity", false, "also run the capacity and money scenarios (issue 43, capacity.go): the next GPU size when the first is refused (422) or its nodes never register, requests per out-of-stock size per --unavailable-size-ttl, a burst under --max-hourly-cost, the price of a mixed burst's nodes against its lower bound; this project's binary and --upstream-binary's where it can run them")
	flag.StringVar(&c.capacityOnly, "capacity-scenarios", "", "with --capacity, only these scenarios, by number, comma-separated (1a, 1b, 3, 4; 1a also runs 2); all when empty")
	flag.StringVar(&c.dir, "dir", "", "directory for sandbox files and autoscaler logs (default: a temp dir)")
	flag.Parse()
	if c.pprofAddr != "" {
		go func() { fmt.Fprintln(os.Stderr, "bench: pprof:", http.ListenAndServe(c.pprofAddr, nil)) }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	if c.pools < 1 || c.trials < 0 || c.nodesPerPool < 1 || c.smallPods < 0 {
		return fmt.Errorf("--pools and --nodes-per-pool must be positive, --trials and --small-pods not negative")
	}
	if err := c.checkDRA(); err != nil {
		return err
	}
	if c.dir == "" {
		tmp, err := os.MkdirTemp("", "ca-bench-")
		if err != nil {
			return err
		}
		c.dir = tmp
	}
	var err error
	c.binary, err = sandbox.AutoscalerBinary(c.dir, func() { fmt.Fprintln(out, "building the autoscaler (set CA_BINARY to skip)...") })
	if err != nil {
		return err
	}
	if c.chaosRun {
		return runChaos(ctx, c, out)
	}
	if c.consolidationRun {
		return runConsolidation(ctx, c, out)
	}
	if c.diurnalRun {
		return runDiurnal(ctx, c, out)
	}
	c.builds = []build{{"this project", c.binary, c.dir}}
	if c.upstream != "" {
		// Its own directory: the same log file names, the same scenario sandboxes.
		up := filepath.Join(c.dir, "upstream")
		if err := os.MkdirAll(up, 0o755); err != nil {
			return err
		}
		c.builds = append(c.builds, build{"upstream " + filepath.Base(c.upstream), c.upstream, up})
	}
	for i, a := range c.also {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("--also-binary %q: want NAME=PATH", a)
		}
		dir := filepath.Join(c.dir, fmt.Sprintf("also-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		c.builds = append(c.builds, build{name, path, dir})
	}
	var failed error
	var plain *scaleRun // this project's scale figures, for --dra
	if c.figures {
		var runs []*rows
		for i, b := range c.builds {
			cb := c
			cb.binary, cb.dir = b.path, b.dir
			fmt.Fprintf(out, "\nfigures run: %s (%s)\n", b.name, b.path)
			r, sr, err := runFigures(ctx, cb, out)
			if i == 0 {
				plain = sr
			}
			if err != nil {
				r.add("run ended early", "%v", err)
				failed = errors.Join(failed, fmt.Errorf("%s: %w", b.name, err))
			}
			runs = append(runs, r)
		}
		if err := printTable(out, "figure", c.buildNames(), runs); err != nil {
			return err
		}
	}
	if c.dra {
		if err := runDRA(ctx, c, out, plain); err != nil {
			failed = errors.Join(failed, fmt.Errorf("dra: %w", err))
		}
	}
	if c.scaleDown {
		if err := runScaleDowns(ctx, c, out); err != nil {
			return err
		}
	}
	if c.large {
		if err := runLarge(ctx, c, out); err != nil {
			failed = errors.Join(failed, err)
		}
	}
	if c.buffer {
		if err := runBuffer(ctx, c, out); err != nil {
			return err
		}
	}
	if c.burst {
		if err := runBurst(ctx, c, out); err != nil {
			return err
		}
	}
	if c.capacity {
		if err := runCapacity(ctx, c, out); err != nil {
			failed = errors.Join(failed, fmt.Errorf("capacity: %w", err))
		}
	}
	return failed
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// build is one autoscaler binary under measurement, with the directory for its logs.
type build struct{ name, path, dir string }

func (c config) buildNames() []string {
	var names []string
	for _, b := range c.builds {
		names = append(names, b.name)
	}
	return names
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func poll(ctx context.Context, timeout, every time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v", timeout)
		}
		if err := sleep(ctx, every); err != nil {
			return err
		}
	}
}
