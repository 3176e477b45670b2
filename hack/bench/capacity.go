package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// The capacity run (issue 43, "Plan within what the account can get and pay for"): four
// short scenarios, each on a sandbox of its own, for this project's binary and, where it
// can run the same scenario, upstream's (--upstream-binary), measured from outside
// through the simulator's pools and stock refusals:
//
//  1. a GPU pod whose first-choice size has no capacity, two GPU sizes allowed: pending →
//     the request for the second size, (a) the first refused with a 422, (b) its droplets
//     never registering (--max-node-provision-time short for both binaries);
//  2. in (a), more GPU pods arriving: the requests for the out-of-stock size in a window
//     longer than --unavailable-size-ttl, and the most within any TTL;
//  3. a burst under --max-hourly-cost: the spend sampled every second, the pods running;
//  4. a burst of mixed pods, pools on demand: the nodes' hourly price ÷ its lower bound.
//
// This project creates pools on demand (size_preference: the first GPU size, then the
// second); upstream's DigitalOcean provider creates none, so it gets one fixed pool per
// size and its default least-waste expander, which prefers the first (smaller) GPU size
// for the run's small GPU pod as well. Upstream 1.36.1 builds a template without
// nvidia.com/gpu for a DOKS pool at 0 nodes ("Insufficient nvidia.com/gpu", no expansion
// option), so its GPU pools start at one node each, taken by a filler GPU pod before the
// measurement: it then builds the templates from those nodes.

const (
	capFirstGPU  = "gpu-l40sx1-48gb" // first choice: cheaper, and least waste for the pod
	capSecondGPU = "gpu-h100x1-80gb"
	capScan      = 5 * time.Second
	// capProvision is --max-node-provision-time for both binaries in every scenario.
	capProvision = 30 * time.Second
	capTTL       = 30 * time.Second // this project's --unavailable-size-ttl
	capWindow    = 70 * time.Second // longer than two TTLs
	// capPodEvery: in scenario 2 a GPU pod arrives this often, so a pod is pending soon
	// after each hold ends.
	capPodEvery  = 10 * time.Second
	capSpendCap  = 0.2 // USD/h; five s-2vcpu-4gb nodes ($0.03571/h) fit under it
	capSpendPods = 12
	capSpendFor  = 45 * time.Second
)

// capMix is scenario 4's burst: the 1500m pods fit no 1-vCPU node, the 5Gi pods nothing
// below s-4vcpu-8gb, the small ones anything.
var capMix = []consolidationWorkload{
	{name: "small", cpu: "250m", mem: "256Mi", grow: 16},
	{name: "cpu", cpu: "1500m", mem: "512Mi", grow: 6},
	{name: "mem", cpu: "500m", mem: "5Gi", grow: 4},
}

type capacityBuild struct {
	name, binary, dir string
	upstream          bool
}

func runCapacity(ctx context.Context, c config, out io.Writer) error {
	builds := []capacityBuild{{name: "this project", binary: c.binary, dir: filepath.Join(c.dir, "capacity")}}
	if c.upstream != "" {
		builds = append(builds, capacityBuild{name: "upstream " + filepath.Base(c.upstream), binary: c.upstream,
			dir: filepath.Join(c.dir, "capacity-upstream"), upstream: true})
	}
	fmt.Fprintf(out, "\ncapacity: --scan-interval=%v --max-node-provision-time=%v for every binary; this project --unavailable-size-ttl=%v; GPU sizes %s then %s; files in %s (%s)\n",
		capScan, capProvision, capTTL, capFirstGPU, capSecondGPU, c.dir, time.Now().UTC().Format(time.RFC3339))
	var runs []*rows
	for _, b := range builds {
		r := &rows{}
		scenarios := []struct {
			name string
			f    func(context.Context, capacityBuild, *rows, io.Writer) error
		}{
			{"1a/2 refusal", capRefusal},
			{"1b never registers", capNeverRegisters},
			{"3 spending limit", capSpend},
			{"4 purchase efficiency", capEfficiency},
		}
		for _, s := range scenarios {
			if !capacitySelected(c.capacityOnly, s.name) {
				continue
			}
			fmt.Fprintf(out, "\ncapacity %s: %s (%s)\n", s.name, b.name, time.Now().UTC().Format("15:04:05"))
			start := time.Now()
			if err := s.f(ctx, b, r, out); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// Reported in the table, not as a figure: nothing of it was measured.
				r.add(s.name+": not measured", "%v", err)
				fmt.Fprintf(out, "  not measured: %v\n", err)
			}
			fmt.Fprintf(out, "  took %v\n", time.Since(start).Round(time.Second))
		}
		runs = append(runs, r)
	}
	var names []string
	for _, b := range builds {
		names = append(names, b.name)
	}
	return printTable(out, "capacity figure", names, runs)
}

// capacitySelected reports whether the scenario named name ("1a/2 refusal") is among
// only's numbers ("1a,4"), or only is empty.
func capacitySelected(only, name string) bool {
	if only == "" {
		return true
	}
	num, _, _ := strings.Cut(name, " ")
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		if n == num || strings.HasPrefix(num, n+"/") {
			return true
		}
	}
	return false
}

// startCapacity starts a sandbox with pools and the autoscaler on it. nap, when not nil,
// is this project's autoprovisioning section (upstream never gets one).
func startCapacity(ctx context.Context, b capacityBuild, scenario string, pools []doks.PoolSpec, nap map[string]any, extra ...string) (*sandbox.Sandbox, *sandbox.Process, error) {
	return startCapacityWith(ctx, b, scenario, pools, nap, nil, extra...)
}

// startCapacityWith is startCapacity with more fields of this project's cloud config
// (cloud, with nap not nil).
func startCapacityWith(ctx context.Context, b capacityBuild, scenario string, pools []doks.PoolSpec, nap, cloud map[string]any, extra ...string) (*sandbox.Sandbox, *sandbox.Process, error) {
	dir := filepath.Join(b.dir, scenario)
	sb, err := sandbox.Start(sandbox.Options{Dir: dir, BootDelay: 3 * time.Second, DeleteDelay: 4 * time.Second, Pools: pools})
	if err != nil {
		return nil, nil, err
	}
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		sb.Stop()
		return nil, nil, err
	}
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false", "--address=127.0.0.1:0",
		"--scan-interval="+capScan.String(), "--max-node-provision-time="+capProvision.String(), "--v=2")
	if nap != nil {
		fields := map[string]any{"cluster_id": sb.ClusterID, "token_file": sb.TokenPath,
			"url": sb.DOKS.URL(), "autoprovisioning": nap}
		maps.Copy(fields, cloud)
		raw, err := json.Marshal(fields)
		if err == nil {
			path := filepath.Join(dir, "cloud-nap.json")
			err = os.WriteFile(path, raw, 0o600)
			args = append(args, "--cloud-config="+path, "--node-autoprovisioning-enabled")
		}
		if err != nil {
			sb.Stop()
			return nil, nil, err
		}
	}
	ca, err := sandbox.RunAutoscaler(b.binary, append(args, extra...), filepath.Join(dir, "autoscaler.log"))
	if err != nil {
		sb.Stop()
		return nil, nil, err
	}
	// The first loops read the pools, sizes and templates.
	if err := sleep(ctx, 2*capScan); err != nil {
		ca.Stop(15 * time.Second)
		sb.Stop()
		return nil, nil, err
	}
	if !ca.Running() {
		sb.Stop()
		return nil, nil, fmt.Errorf("the autoscaler exited: %v (log %s)", ca.Err(), ca.LogPath)
	}
	return sb, ca, nil
}

// gpuSetup is scenario 1's cluster: a tainted base pool the pods stay off, and for
// upstream one fixed pool per GPU size; this project gets the two sizes on demand, the
// first preferred.
func gpuSetup(b capacityBuild) ([]doks.PoolSpec, map[string]any, []string) {
	pools := []doks.PoolSpec{capBasePool()}
	if b.upstream {
		pools = append(pools,
			doks.PoolSpec{Name: "gpu-first", Size: capFirstGPU, Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 10},
			doks.PoolSpec{Name: "gpu-second", Size: capSecondGPU, Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 10})
		return pools, nil, nil
	}
	sizes := []string{capFirstGPU, capSecondGPU}
	return pools, map[string]any{"sizes": sizes, "size_preference": sizes, "max_nodes_per_pool": 10},
		[]string{"--unavailable-size-ttl=" + capTTL.String()}
}

func capBasePool() doks.PoolSpec {
	return doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1,
		Taints: []godo.Taint{{Key: baseTaint, Value: "true", Effect: "NoSchedule"}}}
}

// gpuPodSpec asks for one NVIDIA GPU and tolerates DOKS's GPU taint.
func gpuPodSpec() apiv1.PodSpec {
	spec := podSpec("1")
	one := resource.MustParse("1")
	r := &spec.Containers[0].Resources
	r.Requests["nvidia.com/gpu"] = one
	r.Limits = apiv1.ResourceList{"nvidia.com/gpu": one}
	spec.Tolerations = []apiv1.Toleration{{Key: "nvidia.com/gpu", Operator: apiv1.TolerationOpExists, Effect: apiv1.TaintEffectNoSchedule}}
	spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	return spec
}

// sizeRequested says whether a node of size was asked for: a pool of it with a target
// above its count in before (a pool created on demand is absent from it: 0).
func sizeRequested(pools []godo.KubernetesNodePool, size string, before map[string]int) bool {
	for _, p := range pools {
		if p.Size == size && p.Count > before[p.Name] {
			return true
		}
	}
	return false
}

// poolCounts is each pool's target by name.
func poolCounts(pools []godo.KubernetesNodePool) map[string]int {
	m := map[string]int{}
	for _, p := range pools {
		m[p.Name] = p.Count
	}
	return m
}

// nodesAsked adds up the nodes asked of a size: each raise of a pool's target over the
// last count seen (last starts as the counts before the pod and is kept up to date).
func nodesAsked(last map[string]int, pools []godo.KubernetesNodePool, size string) int {
	n := 0
	for _, p := range pools {
		if p.Size == size && p.Count > last[p.Name] {
			n += p.Count - last[p.Name]
		}
		last[p.Name] = p.Count
	}
	return n
}

// fillGPUs runs one filler GPU pod per GPU node of the fixed pools (upstream's), so
// that the measured pods need new nodes.
func fillGPUs(ctx context.Context, b capacityBuild, sb *sandbox.Sandbox) error {
	if !b.upstream {
		return nil
	}
	if err := createDeploymentOf(ctx, sb, "filler", 2, gpuPodSpec()); err != nil {
		return err
	}
	return waitRunning(ctx, sb, "filler", 2, 2*time.Minute)
}

// loops renders a latency with the scan intervals it spans.
func loops(d time.Duration) string {
	return fmt.Sprintf("%.1fs (%.1f loops of %v)", d.Seconds(), d.Seconds()/capScan.Seconds(), capScan)
}

// capRefusal is scenarios 1a and 2: the first GPU size out of stock for the whole run;
// one GPU pod, then one more every capPodEvery until capWindow after the first refusal.
func capRefusal(ctx context.Context, b capacityBuild, r *rows, out io.Writer) error {
	pools, nap, extra := gpuSetup(b)
	sb, ca, err := startCapacity(ctx, b, "refusal", pools, nap, extra...)
	if err != nil {
		return err
	}
	defer sb.Stop()
	defer ca.Stop(15 * time.Second)
	if err := fillGPUs(ctx, b, sb); err != nil {
		return err
	}
	sb.DOKS.SetOutOfStock(capFirstGPU, time.Hour)
	before := poolCounts(sb.DOKS.Pools())
	t0 := time.Now()
	if err := createDeploymentOf(ctx, sb, "gpu", 1, gpuPodSpec()); err != nil {
		return err
	}
	var second time.Duration
	afterRefusal := time.Duration(-1) // first refusal → second size; -1: no refusal before it
	var refusals []time.Duration      // since the first refusal, as seen every 50 ms
	var first time.Time
	replicas, lastPod := int32(1), t0
	for {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
		now := time.Now()
		for n := sb.DOKS.StockRefusals(capFirstGPU); len(refusals) < n; {
			if first.IsZero() {
				first = now
			}
			refusals = append(refusals, now.Sub(first))
		}
		if second == 0 && sizeRequested(sb.DOKS.Pools(), capSecondGPU, before) {
			second = now.Sub(t0)
			if !first.IsZero() {
				afterRefusal = now.Sub(first)
			}
			fmt.Fprintf(out, "  %s requested %v after the pod (%v after the first refusal; -1ns: none); %d refusal(s) of %s so far\n",
				capSecondGPU, second.Round(10*time.Millisecond), afterRefusal.Round(10*time.Millisecond), len(refusals), capFirstGPU)
		}
		windowStart := first
		if windowStart.IsZero() {
			windowStart = t0 // no refusal yet: the window runs from the pod
		}
		if now.Sub(windowStart) >= capWindow {
			break
		}
		if now.Sub(t0) > 3*time.Minute && second == 0 {
			return fmt.Errorf("%s not requested %v after the pod (log %s)", capSecondGPU, now.Sub(t0).Round(time.Second), ca.LogPath)
		}
		if now.Sub(lastPod) >= capPodEvery {
			replicas++
			lastPod = now
			if err := scaleDeployment(ctx, sb, "gpu", replicas); err != nil {
				return err
			}
		}
	}
	if second == 0 {
		return fmt.Errorf("%s not requested within the window (log %s)", capSecondGPU, ca.LogPath)
	}
	r.add("1a. pending → second GPU size requested, first refused 422 (goal ≤ 2 loops)", "%s", loops(second))
	if afterRefusal >= 0 {
		r.add("1a. first refusal → second GPU size requested", "%s", loops(afterRefusal))
	}
	var at []string
	for _, t := range refusals {
		at = append(at, "+"+t.Round(time.Second).String())
	}
	r.add(fmt.Sprintf("2. requests for the out-of-stock size in %v (a GPU pod every %v)", capWindow, capPodEvery),
		"%d (at %s)", len(refusals), strings.Join(at, ", "))
	r.add(fmt.Sprintf("2. most requests within any %v (goal ≤ 1 per TTL)", capTTL), "%d", mostWithin(refusals, capTTL))
	fmt.Fprintf(out, "  refusals of %s at %s; %d GPU pods created\n", capFirstGPU, strings.Join(at, ", "), replicas)
	return nil
}

// mostWithin is the largest number of the times (sorted, ascending) that fall within
// any half-open interval of length d.
func mostWithin(times []time.Duration, d time.Duration) int {
	most, lo := 0, 0
	for hi := range times {
		for times[hi]-times[lo] >= d {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// capNeverRegisters is scenario 1b: the first GPU size is in stock, but the droplets of
// any pool of it never get a Node (the harness marks each such pool in the node agent
// as soon as the simulator holds it, well before its first droplet boots).
func capNeverRegisters(ctx context.Context, b capacityBuild, r *rows, out io.Writer) error {
	pools, nap, extra := gpuSetup(b)
	var cloud map[string]any
	if !b.upstream {
		// The first size's provision time is its own (the cloud config's
		// max_node_provision_time_by_size); every other size keeps the flag's default,
		// 15 minutes, given after the run's common 30 s so that it is the one read.
		cloud = map[string]any{"max_node_provision_time_by_size": map[string]string{capFirstGPU: capProvision.String()}}
		extra = append(extra, "--max-node-provision-time=15m0s")
	}
	sb, ca, err := startCapacityWith(ctx, b, "never-registers", pools, nap, cloud, extra...)
	if err != nil {
		return err
	}
	defer sb.Stop()
	defer ca.Stop(15 * time.Second)
	marked := map[string]bool{}
	mark := func(pools []godo.KubernetesNodePool) {
		for _, p := range pools {
			if p.Size == capFirstGPU && !marked[p.Name] {
				marked[p.Name] = true
				sb.Agent.NeverRegister(p.Name)
			}
		}
	}
	if err := fillGPUs(ctx, b, sb); err != nil {
		return err
	}
	// New nodes only: the filler's node registered already.
	mark(sb.DOKS.Pools())
	before := poolCounts(sb.DOKS.Pools())
	t0 := time.Now()
	if err := createDeploymentOf(ctx, sb, "gpu", 1, gpuPodSpec()); err != nil {
		return err
	}
	var firstAsked time.Duration
	asked, last := 0, poolCounts(sb.DOKS.Pools())
	limit := capProvision + 2*time.Minute
	err = poll(ctx, limit, 50*time.Millisecond, func() (bool, error) {
		pools := sb.DOKS.Pools()
		mark(pools)
		if firstAsked == 0 && sizeRequested(pools, capFirstGPU, before) {
			firstAsked = time.Since(t0)
		}
		asked += nodesAsked(last, pools, capFirstGPU)
		return sizeRequested(pools, capSecondGPU, before), nil
	})
	took := time.Since(t0)
	if err != nil && ctx.Err() == nil && firstAsked > 0 {
		// Measured, as a bound: what the binary did instead within the run's limit.
		r.add(fmt.Sprintf("1b. pending → second GPU size requested, first's nodes never register (goal ≤ %v + loops)", capProvision),
			"not within %v (the run's limit); first size asked at %.1fs, %d of its nodes asked in all", limit, firstAsked.Seconds(), asked)
		fmt.Fprintf(out, "  %s not requested within %v; %s asked at %v, %d of its nodes asked\n", capSecondGPU, limit,
			capFirstGPU, firstAsked.Round(10*time.Millisecond), asked)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s not requested: %w (log %s)", capSecondGPU, err, ca.LogPath)
	}
	fmt.Fprintf(out, "  %s asked %v after the pod, %s %v after it\n", capFirstGPU, firstAsked.Round(10*time.Millisecond),
		capSecondGPU, took.Round(10*time.Millisecond))
	if firstAsked == 0 {
		// The second size came first: not the scenario measured.
		return fmt.Errorf("%s requested without %s asked first", capSecondGPU, capFirstGPU)
	}
	r.add(fmt.Sprintf("1b. pending → second GPU size requested, first's nodes never register (goal ≤ %v + loops)", capProvision),
		"%s; first size asked at %.1fs (%d node)", loops(took), firstAsked.Seconds(), asked)
	return nil
}

// poolSpend is the hourly price of the pools' nodes: each pool's target or its listed
// nodes, whichever is more (a node is billed from its request until it is gone).
func poolSpend(pools []godo.KubernetesNodePool) float64 {
	total := 0.0
	for _, p := range pools {
		price, _ := doks.SizePrice(p.Size)
		total += price * float64(max(p.Count, len(p.Nodes)))
	}
	return total
}

// capSpend is scenario 3: one autoscaled pool, pods that each need a node of their own,
// --max-hourly-cost. Upstream has no such flag.
func capSpend(ctx context.Context, b capacityBuild, r *rows, out io.Writer) error {
	if b.upstream {
		r.add("3. spending limit", "not run: upstream has no --max-hourly-cost")
		return nil
	}
	pools := []doks.PoolSpec{{Name: "a", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 20}}
	sb, ca, err := startCapacity(ctx, b, "spend", pools, nil, fmt.Sprintf("--max-hourly-cost=%v", capSpendCap))
	if err != nil {
		return err
	}
	defer sb.Stop()
	defer ca.Stop(15 * time.Second)
	if err := createDeployment(ctx, sb, "web", capSpendPods, "1500m"); err != nil {
		return err
	}
	most, samples, over := 0.0, 0, 0
	for end := time.Now().Add(capSpendFor); time.Now().Before(end); {
		spend := poolSpend(sb.DOKS.Pools())
		most = max(most, spend)
		samples++
		if spend > capSpendCap+1e-9 {
			over++
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	running, err := runningPods(ctx, sb, "web")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %d samples, most $%.4f/h, %d above the limit; %d of %d pods running\n", samples, most, over, running, capSpendPods)
	r.add(fmt.Sprintf("3. most spend, sampled every 1s for %v (goal ≤ $%.2f/h)", capSpendFor, capSpendCap),
		"$%.4f/h (%d of %d samples above)", most, over, samples)
	r.add(fmt.Sprintf("3. pods running of %d (1500m, a node each)", capSpendPods), "%d", running)
	return nil
}

// capEfficiency is scenario 4: a burst of mixed pods with pools on demand of a few sizes
// (upstream: a fixed pool per size, min 0); once they all run, the nodes' hourly price
// against the lower bound for their requests.
func capEfficiency(ctx context.Context, b capacityBuild, r *rows, out io.Writer) error {
	pools := []doks.PoolSpec{capBasePool()}
	var nap map[string]any
	if b.upstream {
		for _, size := range consolidationSizes {
			pools = append(pools, doks.PoolSpec{Name: "pool-" + size, Size: size, AutoScale: true, MaxNodes: 10})
		}
	} else {
		nap = map[string]any{"sizes": consolidationSizes, "max_nodes_per_pool": 10}
	}
	sb, ca, err := startCapacity(ctx, b, "efficiency", pools, nap)
	if err != nil {
		return err
	}
	defer sb.Stop()
	defer ca.Stop(15 * time.Second)
	t0 := time.Now()
	total := 0
	for _, w := range capMix {
		if err := createBenchDeployment(ctx, sb, w.name, w.cpu, w.mem, w.grow, 0); err != nil {
			return err
		}
		total += w.grow
	}
	for _, w := range capMix {
		if err := waitRunning(ctx, sb, w.name, w.grow, 4*time.Minute); err != nil {
			return fmt.Errorf("%w (log %s)", err, ca.LogPath)
		}
	}
	took := time.Since(t0)
	pods, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	price := clusterPrice(sb.DOKS.Pools(), "base")
	cpu, mem := podRequests(pods.Items)
	bound, binds := lowerBound(cpu, mem, consolidationSizes)
	nodes := nodeSummary(sb.DOKS.Pools(), "base")
	fmt.Fprintf(out, "  %d pods running after %v on %s: $%.4f/h, bound $%.4f/h (%s binds)\n", total,
		took.Round(time.Second), nodes, price, bound, binds)
	r.add("4. nodes bought for the mixed burst", "%s", nodes)
	r.add("4. hourly price ÷ lower bound (goal ≤ 1.15)", "%.2f ($%.4f ÷ $%.4f, %s binds)", price/bound, price, bound, binds)
	r.add(fmt.Sprintf("4. all %d pods running after", total), "%v", took.Round(time.Second))
	return nil
}
