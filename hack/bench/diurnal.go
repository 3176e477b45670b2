package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// The diurnal run (issue 40, "A day, compressed"): a day of load compressed
// --diurnal-compression times (120: a day in 12 minutes), every duration flag of the
// autoscalers scaled alike, on three pre-made autoscaled pools of three sizes. Deployments
// of four pod sizes follow smooth daily curves with seeded noise, some under PDBs; the
// curve runs --diurnal-warmup (6 hours) before the measured day, so that the day's night
// is spent on the nodes the autoscaler kept, not on those the harness began with. It runs
// this project's binary with consolidation off and on, and upstream's (--upstream-binary),
// one after the other, each on a sandbox of its own, and measures from outside: the
// simulator's pools and nodes over time (the bill), the pods' eviction conditions, the
// autoscaler's events on nodes (which evictions consolidation caused), pending pods.

// diurnalSizes are the three pools' sizes; the lower bound is taken over them.
var diurnalSizes = []string{"s-2vcpu-4gb", "s-4vcpu-8gb", "s-8vcpu-16gb"}

// diurnalPoolMax is each pool's max_nodes.
const diurnalPoolMax = 20

// consolidateTag opts a pool into this project's consolidation (upstream ignores it).
const consolidateTag = "k8s-cluster-autoscaler-consolidate"

// diurnalWorkload is one Deployment of the day.
type diurnalWorkload struct {
	name           string
	cpu, mem       string
	trough, peak   int     // replicas at the curve's low and high
	peakHour       float64 // hour of the day of the peak; the trough is 12 hours away
	maxUnavailable int     // of its PDB; 0: none
}

// diurnalWorkloads: the mem pods fit nothing below s-4vcpu-8gb, the others any size.
var diurnalWorkloads = []diurnalWorkload{
	{name: "web", cpu: "250m", mem: "512Mi", trough: 6, peak: 32, peakHour: 13, maxUnavailable: 1},
	{name: "api", cpu: "1", mem: "2Gi", trough: 2, peak: 10, peakHour: 12, maxUnavailable: 1},
	{name: "worker", cpu: "500m", mem: "1Gi", trough: 2, peak: 14, peakHour: 18},
	{name: "mem", cpu: "1500m", mem: "5Gi", trough: 1, peak: 4, peakHour: 15},
}

// diurnalStep is how often (day time) the replicas follow the curve.
const diurnalStep = 10 * time.Minute

// stepOf is the load's step at day time t (negative in the warm-up); stepTime its start.
func stepOf(t time.Duration) int {
	return int(math.Floor(float64(t) / float64(diurnalStep)))
}

func stepTime(k int) time.Duration { return time.Duration(k) * diurnalStep }

// diurnalSampleEvery is the day time between pending-pod samples (72 a day).
const diurnalSampleEvery = 20 * time.Minute

type diurnalConfig struct {
	compression float64
	seed        uint64
	modes       string
	// noise is the relative standard deviation of each step's replicas.
	noise float64
	// warmup is the day time the load follows its curve before the measured day: the
	// day starts on the cluster the autoscaler left after the evening before, not on
	// the nodes the harness began with (which every build shared for the night's hours).
	warmup time.Duration
	// steady is the day time the load is held after the day; evictions are counted in
	// its part after steadySettle.
	steady, steadySettle time.Duration
	// rebuy: a node of the pool of a node drained is created within this day time after
	// the drain began: the drain was churn.
	rebuy time.Duration
}

// diurnalReplicas is w's replica count at day time t (any duration; the curve repeats
// daily) for the step's noise factor: trough + (peak - trough) · (1 - cos)/2, peaking at
// peakHour, times 1+noise, rounded, at least trough... never below 0.
func diurnalReplicas(w diurnalWorkload, t time.Duration, noise float64) int {
	hours := t.Hours() - w.peakHour
	bump := (1 + math.Cos(2*math.Pi*hours/24)) / 2
	v := (float64(w.trough) + float64(w.peak-w.trough)*bump) * (1 + noise)
	return max(0, int(math.Round(v)))
}

// stepNoise is the seeded noise of workload i at step k: normal, relative sd, clipped at
// ±2.5 sd; the same for every build of a run.
func stepNoise(seed uint64, i, k int, sd float64) float64 {
	r := rand.New(rand.NewPCG(seed, uint64(k)<<8|uint64(i)))
	return math.Max(-2.5, math.Min(2.5, r.NormFloat64())) * sd
}

// scaled divides a day-time duration by the compression, rounded to a millisecond.
func (dc diurnalConfig) scaled(d time.Duration) time.Duration {
	return (time.Duration(float64(d) / dc.compression)).Round(time.Millisecond)
}

// diurnalFlags are the duration flags both binaries take, scaled from their defaults;
// the scan interval is at least a second (a loop every 83 ms would be a different
// autoscaler on 2 shared cores), the same for every build.
func (dc diurnalConfig) diurnalFlags(verbosity int) []string {
	return []string{
		"--scan-interval=" + max(dc.scaled(10*time.Second), time.Second).String(),
		"--scale-down-unneeded-time=" + dc.scaled(10*time.Minute).String(),
		"--scale-down-unready-time=" + dc.scaled(20*time.Minute).String(),
		"--scale-down-delay-after-add=" + dc.scaled(10*time.Minute).String(),
		"--scale-down-delay-after-delete=0s",
		"--scale-down-delay-after-failure=" + dc.scaled(3*time.Minute).String(),
		"--max-node-provision-time=" + dc.scaled(15*time.Minute).String(),
		"--node-delete-delay-after-taint=" + dc.scaled(5*time.Second).String(),
		fmt.Sprintf("--v=%d", verbosity),
	}
}

// upstreamFlags are the duration flags only upstream implements, scaled alike: this
// project refuses any value but their defaults (it rechecks unremovable nodes every
// loop and judges registered nodes by readiness).
func (dc diurnalConfig) upstreamFlags() []string {
	return []string{
		"--max-node-startup-time=" + dc.scaled(15*time.Minute).String(),
		"--unremovable-node-recheck-timeout=" + dc.scaled(5*time.Minute).String(),
	}
}

// consolidationFlags are this project's consolidation flags, scaled alike; the eviction
// cost (USD) is divided too, since every saving is a price over a compressed time.
func (dc diurnalConfig) consolidationFlags() []string {
	return []string{"--consolidation-enabled",
		"--consolidation-stabilization-window=" + dc.scaled(5*time.Minute).String(),
		"--consolidation-saving-horizon=" + dc.scaled(time.Hour).String(),
		"--consolidation-workload-cooldown=" + dc.scaled(time.Hour).String(),
		"--consolidation-eviction-cost=" + strconv.FormatFloat(0.005/dc.compression, 'g', 6, 64),
	}
}

// diurnalResult is one build's day.
type diurnalResult struct {
	evictions, byScaleDown, byConsolidation int
	meanPods                                float64
	bill, bound                             float64 // USD over the day (real seconds)
	samples, pending                        int
	steadyEvictions                         int
	drains                                  []drainRecord
	churnDrains, churnEvictions             int
	createdNodes                            int
	peakNodes                               int
	// stall is the longest gap between two of the harness's 100 ms ticks: a machine so
	// loaded that the load's steps and the samples fell behind the day's clock.
	stall time.Duration
}

func runDiurnal(ctx context.Context, c config, out io.Writer) error {
	dc := c.diurnal
	if dc.compression < 1 {
		return fmt.Errorf("--diurnal-compression must be at least 1")
	}
	common := dc.diurnalFlags(c.verbosity)
	var builds []consolidationBuild
	for _, mode := range strings.Split(dc.modes, ",") {
		switch mode {
		case "off":
			builds = append(builds, consolidationBuild{name: "this project, consolidation off", binary: c.binary,
				dir: filepath.Join(c.dir, "diurnal-off")})
		case "on":
			builds = append(builds, consolidationBuild{name: "this project, consolidation on", binary: c.binary,
				dir: filepath.Join(c.dir, "diurnal-on"), extra: dc.consolidationFlags()})
		case "on+cost":
			builds = append(builds, consolidationBuild{name: "this project, consolidation on, pod deletion costs", binary: c.binary,
				dir: filepath.Join(c.dir, "diurnal-on-cost"), extra: append(dc.consolidationFlags(), "--pod-deletion-cost-on-unneeded-nodes")})
		case "":
		default:
			return fmt.Errorf("--diurnal-modes: %q is none of off, on and on+cost", mode)
		}
	}
	if c.upstream != "" {
		builds = append(builds, consolidationBuild{name: "upstream " + filepath.Base(c.upstream), binary: c.upstream,
			dir: filepath.Join(c.dir, "diurnal-upstream"), upstream: true, extra: dc.upstreamFlags()})
	}
	fmt.Fprintf(out, "diurnal: a day compressed %g×, after a warm-up of %v (day time, not counted), seed %d, noise %.0f%%; common flags %s; files in %s\n",
		dc.compression, dc.warmup, dc.seed, dc.noise*100, strings.Join(common, " "), c.dir)
	var results []diurnalResult
	for _, b := range builds {
		fmt.Fprintf(out, "\ndiurnal run: %s %s (%s)\n", b.name, strings.Join(b.extra, " "), time.Now().UTC().Format("15:04:05"))
		res, err := runDiurnalBuild(ctx, dc, b, common, out)
		if err != nil {
			return fmt.Errorf("diurnal (%s): %w", b.name, err)
		}
		results = append(results, res)
		printDiurnalTimeline(out, dc, b.name, res)
		printDiurnalSummary(out, b.name, res)
	}
	return printDiurnal(out, dc, builds, results)
}

// printDiurnalSummary prints one build's figures as soon as its day is over.
func printDiurnalSummary(out io.Writer, name string, r diurnalResult) {
	fmt.Fprintf(out, "  %s: evictions per pod per day %.2f (%d ÷ %.1f; scale-down %d, consolidation %d), bill ÷ bound %.2f ($%.4f ÷ $%.4f), pending samples %d of %d, steady-stretch evictions %d, churn drains %d of %d, longest harness stall %v\n",
		name, evictionsPerPodDay(r.evictions, r.meanPods), r.evictions, r.meanPods, r.byScaleDown, r.byConsolidation,
		r.bill/r.bound, r.bill, r.bound, r.pending, r.samples, r.steadyEvictions, r.churnDrains, len(r.drains), r.stall.Round(time.Millisecond))
}

func printDiurnal(out io.Writer, dc diurnalConfig, builds []consolidationBuild, results []diurnalResult) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\ndiurnal figure (%g×)", dc.compression)
	for _, b := range builds {
		fmt.Fprintf(tw, "\t%s", b.name)
	}
	fmt.Fprintln(tw)
	row := func(name string, f func(r diurnalResult) string) {
		fmt.Fprint(tw, name)
		for _, r := range results {
			fmt.Fprintf(tw, "\t%s", f(r))
		}
		fmt.Fprintln(tw)
	}
	row("evictions per pod per day", func(r diurnalResult) string {
		return fmt.Sprintf("%.2f (%d ÷ %.1f)", evictionsPerPodDay(r.evictions, r.meanPods), r.evictions, r.meanPods)
	})
	row("  by scale-down / by consolidation", func(r diurnalResult) string {
		return fmt.Sprintf("%d / %d", r.byScaleDown, r.byConsolidation)
	})
	row("bill over the day ÷ its lower bound", func(r diurnalResult) string {
		return fmt.Sprintf("%.2f", r.bill/r.bound)
	})
	row("bill ÷ first build's bill", func(r diurnalResult) string {
		return fmt.Sprintf("%.3f", r.bill/results[0].bill)
	})
	row("samples with pending pods", func(r diurnalResult) string { return fmt.Sprintf("%d of %d", r.pending, r.samples) })
	row("evictions in the steady stretch", func(r diurnalResult) string { return strconv.Itoa(r.steadyEvictions) })
	row("drained nodes / bought again soon after", func(r diurnalResult) string {
		return fmt.Sprintf("%d / %d (%d evictions)", len(r.drains), r.churnDrains, r.churnEvictions)
	})
	row("longest harness stall (want < 1s)", func(r diurnalResult) string { return r.stall.Round(time.Millisecond).String() })
	row("nodes created over the day / most at once", func(r diurnalResult) string {
		return fmt.Sprintf("%d / %d", r.createdNodes, r.peakNodes)
	})
	return tw.Flush()
}

// evictionsPerPodDay is evictions over the day ÷ the mean pod count.
func evictionsPerPodDay(evictions int, meanPods float64) float64 {
	if meanPods == 0 {
		return 0
	}
	return float64(evictions) / meanPods
}

func printDiurnalTimeline(out io.Writer, dc diurnalConfig, name string, r diurnalResult) {
	fmt.Fprintf(out, "  churn timeline, %s (day time; a drain is churn when its pool bought a node within %v after it began):\n", name, dc.rebuy)
	for _, d := range r.drains {
		again := "-"
		if d.rebought >= 0 {
			again = fmt.Sprintf("bought again at %s (+%v)", dayClock(d.rebought), (d.rebought - d.at).Round(time.Minute))
		}
		fmt.Fprintf(out, "    %s  %-28s %-13s %-13s %2d pod(s) evicted  %s\n", dayClock(d.at), d.node, d.size, d.cause, d.evictions, again)
	}
}

// dayClock renders a day time as HH:MM (+1d past midnight).
func dayClock(t time.Duration) string {
	d := ""
	if t >= 24*time.Hour {
		d, t = "+1d ", t-24*time.Hour
	}
	if t < 0 {
		return "-" + dayClock(-t)
	}
	return fmt.Sprintf("%s%02d:%02d", d, int(t.Hours()), int(t.Minutes())%60)
}

// nodeLife is a droplet as the harness saw it in the simulator's listings, in day time.
type nodeLife struct {
	pool, size string
	created    time.Duration
	seen       bool
}

// eviction is one pod the Eviction API evicted, in day time.
type eviction struct {
	node string
	at   time.Duration
}

// drainRecord is one node whose pods were evicted, in day time.
type drainRecord struct {
	node, pool, size string
	at               time.Duration // its first eviction
	evictions        int
	cause            string        // "scale-down" or "consolidation"
	rebought         time.Duration // creation of a node of its pool after at, within the window; -1: none
}

// drainsOf groups the evictions by node and finds, for each drain, whether its pool
// bought a node within window after it began. consolidated says whether a node's
// evictions at a time came from a consolidation command.
func drainsOf(evs []eviction, nodes map[string]nodeLife, window time.Duration, consolidated func(node string, at time.Duration) bool) []drainRecord {
	byNode := map[string]*drainRecord{}
	for _, e := range evs {
		d := byNode[e.node]
		if d == nil {
			n := nodes[e.node]
			d = &drainRecord{node: e.node, pool: n.pool, size: n.size, at: e.at, rebought: -1, cause: "scale-down"}
			byNode[e.node] = d
		}
		d.evictions++
		d.at = min(d.at, e.at)
	}
	var out []drainRecord
	for _, d := range byNode {
		if consolidated(d.node, d.at) {
			d.cause = "consolidation"
		}
		for name, n := range nodes {
			if name == d.node || n.pool != d.pool || n.created < d.at || n.created > d.at+window {
				continue
			}
			if d.rebought < 0 || n.created < d.rebought {
				d.rebought = n.created
			}
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].at < out[j].at || out[i].at == out[j].at && out[i].node < out[j].node
	})
	return out
}

// integrator sums a quantity sampled over time (trapezoids would ask for the next
// sample; a step from each sample to the next is what a price that changes at node
// events is).
type integrator struct {
	last  time.Time
	value float64
	sum   float64 // value × seconds
	secs  float64
}

func (g *integrator) observe(now time.Time, v float64) {
	if !g.last.IsZero() {
		dt := now.Sub(g.last).Seconds()
		g.sum += g.value * dt
		g.secs += dt
	}
	g.last, g.value = now, v
}

func (g *integrator) mean() float64 {
	if g.secs == 0 {
		return 0
	}
	return g.sum / g.secs
}

// diurnalWatch follows the bench pods: when each was first seen, which the Eviction API
// evicted (and from which node, when).
type diurnalWatch struct {
	mu        sync.Mutex
	firstSeen map[string]time.Time
	evicted   map[string]struct {
		node string
		at   time.Time
	}
	store cache.Store
}

func (w *diurnalWatch) start(ctx context.Context, sb *sandbox.Sandbox) {
	w.firstSeen = map[string]time.Time{}
	w.evicted = map[string]struct {
		node string
		at   time.Time
	}{}
	factory := informers.NewSharedInformerFactoryWithOptions(sb.Kube, 0, informers.WithNamespace("bench"))
	inf := factory.Core().V1().Pods().Informer()
	w.store = inf.GetStore()
	see := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p, ok := obj.(*apiv1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		uid := string(p.UID)
		if _, ok := w.firstSeen[uid]; !ok {
			w.firstSeen[uid] = now
		}
		if _, done := w.evicted[uid]; !done && evictedByAPI(p) {
			w.evicted[uid] = struct {
				node string
				at   time.Time
			}{p.Spec.NodeName, now}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, n any) { see(n) }, DeleteFunc: see})
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
}

// live returns the bench pods not terminating, and how many have waited unscheduled
// longer than wait.
func (w *diurnalWatch) live(now time.Time, wait time.Duration) (pods []apiv1.Pod, pending int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, obj := range w.store.List() {
		p, ok := obj.(*apiv1.Pod)
		if !ok || p.DeletionTimestamp != nil || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		pods = append(pods, *p)
		if p.Spec.NodeName == "" && now.Sub(w.firstSeen[string(p.UID)]) > wait {
			pending++
		}
	}
	return pods, pending
}

func runDiurnalBuild(ctx context.Context, dc diurnalConfig, b consolidationBuild, common []string, out io.Writer) (diurnalResult, error) {
	var res diurnalResult
	pools := []doks.PoolSpec{{Name: "base", Size: "s-2vcpu-4gb", Count: 1,
		Taints: []godo.Taint{{Key: baseTaint, Value: "true", Effect: "NoSchedule"}}}}
	for _, size := range diurnalSizes {
		pools = append(pools, doks.PoolSpec{Name: "pool-" + size, Size: size, AutoScale: true, MinNodes: 0, MaxNodes: diurnalPoolMax,
			Tags: []string{consolidateTag}})
	}
	// A droplet boots in about 4 minutes and goes in about 1 on DigitalOcean: scaled alike.
	sb, err := sandbox.Start(sandbox.Options{Dir: b.dir, BootDelay: dc.scaled(4 * time.Minute), DeleteDelay: dc.scaled(time.Minute), Pools: pools})
	if err != nil {
		return res, err
	}
	defer sb.Stop()
	// DigitalOcean's rate limits are budgets per time: scaled alike.
	sb.DOKS.SetMinuteLimit(int(float64(doks.DefaultMinuteLimit) * dc.compression))
	sb.DOKS.SetRateLimit(int(float64(doks.DefaultRateLimit) * dc.compression))
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return res, err
	}
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false", "--address=127.0.0.1:0")
	args = append(append(args, common...), b.extra...)
	ca, err := sandbox.RunAutoscaler(b.binary, args, filepath.Join(b.dir, "autoscaler.log"))
	if err != nil {
		return res, err
	}
	defer ca.Stop(15 * time.Second)
	failed := func(err error) error { return fmt.Errorf("%w (log %s)", err, ca.LogPath) }

	noise := func(i, k int) float64 { return stepNoise(dc.seed, i, k, dc.noise) }
	// The load of the warm-up's first step, running, before the clock starts.
	first := stepOf(-dc.warmup)
	for i, w := range diurnalWorkloads {
		if err := createDiurnalWorkload(ctx, sb, w, diurnalReplicas(w, stepTime(first), noise(i, first))); err != nil {
			return res, err
		}
	}
	for i, w := range diurnalWorkloads {
		if err := waitRunning(ctx, sb, w.name, diurnalReplicas(w, stepTime(first), noise(i, first)), 10*time.Minute); err != nil {
			return res, failed(err)
		}
	}
	pw := &diurnalWatch{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	pw.start(watchCtx, sb)

	start := time.Now()
	dayOf := func(t time.Time) time.Duration {
		return time.Duration(float64(t.Sub(start))*dc.compression) - dc.warmup
	}
	day := 24 * time.Hour
	end := day + dc.steady
	scan := max(dc.scaled(10*time.Second), time.Second)
	pendingWait := 2 * scan
	nodes := map[string]nodeLife{}
	var price, bound, pods integrator
	var lastStep, lastSample, lastHour = first, -1, -1
	var lastTick time.Time
	current := make([]int, len(diurnalWorkloads))
	for i, w := range diurnalWorkloads {
		current[i] = diurnalReplicas(w, stepTime(first), noise(i, first))
	}
	fmt.Fprintf(out, "  %s (%s): warm-up starts: %s\n", dayClock(-dc.warmup), time.Now().UTC().Format("15:04:05"), nodeSummary(sb.DOKS.Pools(), "base"))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
		if !ca.Running() {
			return res, failed(fmt.Errorf("the autoscaler exited: %v", ca.Err()))
		}
		now := time.Now()
		t := dayOf(now)
		if !lastTick.IsZero() && now.Sub(lastTick) > res.stall {
			res.stall = now.Sub(lastTick)
		}
		lastTick = now
		if t >= end {
			break
		}
		// The load: each step, every workload follows its curve (held after the day).
		if k := stepOf(min(t, day)); k != lastStep {
			lastStep = k
			for i, w := range diurnalWorkloads {
				want := diurnalReplicas(w, stepTime(k), noise(i, k))
				if want != current[i] {
					err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
						return scaleDeployment(ctx, sb, w.name, int32(want))
					})
					if err != nil {
						return res, err
					}
					current[i] = want
				}
			}
		}
		// Nodes, from the simulator's listings.
		listed := sb.DOKS.Pools()
		live := 0
		for _, p := range listed {
			if p.Name == "base" {
				continue
			}
			for _, n := range p.Nodes {
				live++
				if _, ok := nodes[n.Name]; !ok {
					nodes[n.Name] = nodeLife{pool: p.Name, size: p.Size, created: t, seen: true}
					if t > 0 && t < day {
						res.createdNodes++
					}
				}
			}
		}
		livePods, pending := pw.live(now, pendingWait)
		if t >= 0 && t < day {
			res.peakNodes = max(res.peakNodes, live)
			price.observe(now, clusterPrice(listed, "base"))
			cpu, mem := podRequests(livePods)
			lb, _ := lowerBound(cpu, mem, diurnalSizes)
			bound.observe(now, lb)
			pods.observe(now, float64(len(livePods)))
			if s := int(t / diurnalSampleEvery); s != lastSample {
				lastSample = s
				res.samples++
				if pending > 0 {
					res.pending++
				}
			}
		}
		if h := int(math.Floor(t.Hours())); h != lastHour {
			lastHour = h
			fmt.Fprintf(out, "  %s: %d pods (%d pending), %s, $%.4f/h\n", dayClock(t), len(livePods), pending, nodeSummary(listed, "base"), clusterPrice(listed, "base"))
		}
	}
	// Close the integrals at the end of the day.
	res.bill = price.sum / 3600
	res.bound = bound.sum / 3600
	res.meanPods = pods.mean()
	stopWatch()

	consolidated, err := consolidationEvents(ctx, sb, dayOf)
	if err != nil {
		return res, err
	}
	var evs []eviction
	pw.mu.Lock()
	for _, e := range pw.evicted {
		at := dayOf(e.at)
		switch {
		case at >= 0 && at < day:
			evs = append(evs, eviction{node: e.node, at: at})
		case at >= day+dc.steadySettle:
			res.steadyEvictions++
		}
	}
	pw.mu.Unlock()
	res.evictions = len(evs)
	res.drains = drainsOf(evs, nodes, dc.rebuy, consolidated)
	for _, d := range res.drains {
		if d.cause == "consolidation" {
			res.byConsolidation += d.evictions
		} else {
			res.byScaleDown += d.evictions
		}
		if d.rebought >= 0 {
			res.churnDrains++
			res.churnEvictions += d.evictions
		}
	}
	return res, writeDiurnalNodes(b.dir, nodes)
}

// consolidationEvents reads the autoscaler's events on nodes and answers whether a
// node's drain beginning at a day time was a consolidation command's: a
// ConsolidationPlanned on the node before it, not followed by a ConsolidationAborted
// before it.
func consolidationEvents(ctx context.Context, sb *sandbox.Sandbox, dayOf func(time.Time) time.Duration) (func(string, time.Duration) bool, error) {
	evs, err := sb.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
	if err != nil {
		return nil, err
	}
	type mark struct {
		at      time.Duration
		planned bool
	}
	byNode := map[string][]mark{}
	for _, e := range evs.Items {
		var planned bool
		switch e.Reason {
		case "ConsolidationPlanned":
			planned = true
		case "ConsolidationAborted":
		default:
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		byNode[e.InvolvedObject.Name] = append(byNode[e.InvolvedObject.Name], mark{at: dayOf(at), planned: planned})
	}
	// Event times have a resolution of a second: a planned mark up to a second (real)
	// after the first eviction still counts.
	slack := dayOf(time.Unix(1, 0)) - dayOf(time.Unix(0, 0))
	return func(node string, at time.Duration) bool {
		ms := byNode[node]
		sort.Slice(ms, func(i, j int) bool { return ms[i].at < ms[j].at })
		planned := false
		for _, m := range ms {
			if m.at > at+slack {
				break
			}
			planned = m.planned
		}
		return planned
	}, nil
}

// writeDiurnalNodes keeps every node's pool and creation (day time) beside the log.
func writeDiurnalNodes(dir string, nodes map[string]nodeLife) error {
	var lines []string
	for name, n := range nodes {
		lines = append(lines, fmt.Sprintf("%s\t%s\t%s\t%s", dayClock(n.created), n.pool, n.size, name))
	}
	sort.Strings(lines)
	return os.WriteFile(filepath.Join(dir, "nodes.tsv"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func createDiurnalWorkload(ctx context.Context, sb *sandbox.Sandbox, w diurnalWorkload, replicas int) error {
	return createBenchDeployment(ctx, sb, w.name, w.cpu, w.mem, replicas, w.maxUnavailable)
}
