package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/digitalocean/godo"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// The consolidation run (issue 34): a workload grows across several node sizes with
// pools on demand, then shrinks to a third, leaving nodes part empty; after the cluster
// settles, its hourly price is set beside a lower bound for what the remaining pods
// need. It runs this project's binary with consolidation off and on, and upstream's
// (--upstream-binary), each on a sandbox of its own, and measures from outside: the
// simulator's pools, the pods' eviction conditions and the pods Ready under each PDB.

// consolidationSizes are the sizes the run allows: the autoprovisioning section's list
// for this project, one pre-made pool each for upstream (whose DigitalOcean provider
// creates no pools). The lower bound is taken over the same list.
var consolidationSizes = []string{"s-2vcpu-2gb", "s-2vcpu-4gb", "s-4vcpu-8gb", "s-8vcpu-16gb"}

// consolidationWorkload is one Deployment of the run.
type consolidationWorkload struct {
	name     string
	cpu, mem string
	grow     int // replicas at the peak; a third of them remain
	// maxUnavailable of its PDB; 0: no PDB.
	maxUnavailable int
}

// consolidationWorkloads need different sizes: the 1500m pods no 1-vCPU node, the
// 5Gi pods nothing below s-4vcpu-8gb; so the growth creates pools of several sizes.
var consolidationWorkloads = []consolidationWorkload{
	{name: "small", cpu: "250m", mem: "256Mi", grow: 24, maxUnavailable: 1},
	{name: "cpu", cpu: "1500m", mem: "512Mi", grow: 9, maxUnavailable: 1},
	{name: "mem", cpu: "500m", mem: "5Gi", grow: 6},
}

// baseTaint keeps the bench's pods off the one hand-made pool, whose node the cluster
// needs whatever the workload; it is left out of the price.
const baseTaint = "bench.consolidation/base"

type consolidationConfig struct {
	settle  time.Duration // no change for this long: settled
	timeout time.Duration // limit of the growth and of the settling
	// modes: which of this project's runs ("off", "on") to make.
	modes string
}

// consolidationBuild is one of the run's three autoscalers.
type consolidationBuild struct {
	name, binary, dir string
	upstream          bool     // pre-made pools instead of autoprovisioning
	extra             []string // flags of this build alone
}

// consolidationResult is what one build's run measured.
type consolidationResult struct {
	peakPrice, price, bound float64
	binds                   string // "vCPU" or "memory"
	nodes                   string // e.g. "1 × s-8vcpu-16gb, 2 × s-2vcpu-2gb"
	tally                   evictionTally
	pdbViolations           int
	settle                  time.Duration
	settled                 bool
	createdPools            int
}

// consolidationOnFlags are consolidation's flags in this scenario, whose
// durations run at a tenth of their defaults (--scale-down-unneeded-time
// 1m): the stabilization window (5m) and, as the compressed day scales
// them, the cost model's horizon and cooldown (1h) and the cost of an
// eviction (USD: a saving is a price over a time, so breaking even takes
// a tenth of the time too). With the eviction cost at its default, a
// delete of an s-2vcpu-2gb breaks even 12 minutes after the last
// scale-up, past the run's settling.
func consolidationOnFlags() []string {
	return []string{"--consolidation-enabled", "--consolidation-stabilization-window=30s",
		"--consolidation-saving-horizon=6m", "--consolidation-workload-cooldown=6m", "--consolidation-eviction-cost=0.0005",
		"--consolidation-max-disrupted-nodes=3"}
}

func runConsolidation(ctx context.Context, c config, out io.Writer) error {
	cc := c.consolidation
	common := []string{"--scan-interval=5s", "--scale-down-unneeded-time=1m", "--scale-down-delay-after-add=0s",
		"--scale-down-delay-after-delete=0s", fmt.Sprintf("--v=%d", c.verbosity)}
	var builds []consolidationBuild
	for _, mode := range strings.Split(cc.modes, ",") {
		switch mode {
		case "off":
			builds = append(builds, consolidationBuild{name: "this project, consolidation off", binary: c.binary,
				dir: filepath.Join(c.dir, "consolidation-off")})
		case "on":
			builds = append(builds, consolidationBuild{name: "this project, consolidation on", binary: c.binary,
				dir:   filepath.Join(c.dir, "consolidation-on"),
				extra: consolidationOnFlags()})
		case "":
		default:
			return fmt.Errorf("--consolidation-modes: %q is neither off nor on", mode)
		}
	}
	if c.upstream != "" {
		builds = append(builds, consolidationBuild{name: "upstream " + filepath.Base(c.upstream), binary: c.upstream,
			dir: filepath.Join(c.dir, "consolidation-upstream"), upstream: true})
	}
	fmt.Fprintf(out, "consolidation: common flags %s; settled after %v without change; files in %s\n",
		strings.Join(common, " "), cc.settle, c.dir)
	var results []consolidationResult
	var bad []string
	for _, b := range builds {
		fmt.Fprintf(out, "\nconsolidation run: %s %s\n", b.name, strings.Join(b.extra, " "))
		res, err := runConsolidationBuild(ctx, cc, b, common, out)
		if err != nil {
			return fmt.Errorf("consolidation (%s): %w", b.name, err)
		}
		results = append(results, res)
		if b.upstream {
			continue // reported, not judged
		}
		if res.pdbViolations > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d PDB violations", b.name, res.pdbViolations))
		}
		// Without consolidation the scale-down planner may move a pod onto a node it
		// removes later, as upstream's does; consolidation plans the end state, so there a
		// pod evicted twice is a fault.
		if slicesContains(b.extra, "--consolidation-enabled") && res.tally.twice > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d pods evicted twice", b.name, res.tally.twice))
		}
	}
	if err := printConsolidation(out, builds, results); err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("consolidation: %s (logs in %s)", strings.Join(bad, "; "), c.dir)
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func printConsolidation(out io.Writer, builds []consolidationBuild, results []consolidationResult) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nconsolidation figure")
	for _, b := range builds {
		fmt.Fprintf(tw, "\t%s", b.name)
	}
	fmt.Fprintln(tw)
	row := func(name string, f func(r consolidationResult) string) {
		fmt.Fprint(tw, name)
		for _, r := range results {
			fmt.Fprintf(tw, "\t%s", f(r))
		}
		fmt.Fprintln(tw)
	}
	row("hourly price at the peak", func(r consolidationResult) string { return fmt.Sprintf("$%.4f", r.peakPrice) })
	row("hourly price after settling", func(r consolidationResult) string { return fmt.Sprintf("$%.4f", r.price) })
	row("nodes after settling", func(r consolidationResult) string { return r.nodes })
	row("lower bound for the remaining pods", func(r consolidationResult) string {
		return fmt.Sprintf("$%.4f (%s binds)", r.bound, r.binds)
	})
	row("price / lower bound (goal ≤ 1.2)", func(r consolidationResult) string { return fmt.Sprintf("%.2f", r.price/r.bound) })
	row("pods evicted / pods moved", func(r consolidationResult) string {
		if r.tally.moved == 0 {
			return fmt.Sprintf("%d / 0", r.tally.evicted)
		}
		return fmt.Sprintf("%d / %d = %.2f", r.tally.evicted, r.tally.moved, float64(r.tally.evicted)/float64(r.tally.moved))
	})
	row("pods evicted twice", func(r consolidationResult) string { return strconv.Itoa(r.tally.twice) })
	row("PDB violations", func(r consolidationResult) string { return strconv.Itoa(r.pdbViolations) })
	row("pools created", func(r consolidationResult) string { return strconv.Itoa(r.createdPools) })
	row("time to settle (shrink → last change)", func(r consolidationResult) string {
		if !r.settled {
			return fmt.Sprintf("not settled; last change at %v", r.settle.Round(time.Second))
		}
		return r.settle.Round(time.Second).String()
	})
	return tw.Flush()
}

func runConsolidationBuild(ctx context.Context, cc consolidationConfig, b consolidationBuild, common []string, out io.Writer) (consolidationResult, error) {
	var res consolidationResult
	pools := []doks.PoolSpec{{Name: "base", Size: "s-2vcpu-4gb", Count: 1,
		Taints: []godo.Taint{{Key: baseTaint, Value: "true", Effect: "NoSchedule"}}}}
	if b.upstream {
		for _, size := range consolidationSizes {
			pools = append(pools, doks.PoolSpec{Name: "pool-" + size, Size: size, AutoScale: true, MinNodes: 0, MaxNodes: 10})
		}
	}
	sb, err := sandbox.Start(sandbox.Options{Dir: b.dir, BootDelay: 3 * time.Second, DeleteDelay: 4 * time.Second, Pools: pools})
	if err != nil {
		return res, err
	}
	defer sb.Stop()
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return res, err
	}
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false", "--address=127.0.0.1:0")
	if !b.upstream {
		cloudConfig, err := writeConsolidationCloudConfig(sb, b.dir)
		if err != nil {
			return res, err
		}
		args = append(args, "--cloud-config="+cloudConfig, "--node-autoprovisioning-enabled")
	}
	args = append(append(args, common...), b.extra...)
	ca, err := sandbox.RunAutoscaler(b.binary, args, filepath.Join(b.dir, "autoscaler.log"))
	if err != nil {
		return res, err
	}
	defer ca.Stop(15 * time.Second)
	failed := func(err error) error { return fmt.Errorf("%w (log %s)", err, ca.LogPath) }

	// Growth, one workload after another, so each one's pods meet the nodes the last
	// one left.
	start := time.Now()
	for _, w := range consolidationWorkloads {
		if err := createConsolidationWorkload(ctx, sb, w); err != nil {
			return res, err
		}
		if err := waitRunning(ctx, sb, w.name, w.grow, cc.timeout); err != nil {
			return res, failed(err)
		}
		fmt.Fprintf(out, "  %5s: %d × %s (%s, %s) running\n", time.Since(start).Round(time.Second), w.grow, w.name, w.cpu, w.mem)
	}
	res.peakPrice = clusterPrice(sb.DOKS.Pools(), "base")
	fmt.Fprintf(out, "  %5s: peak: %s, $%.4f an hour\n", time.Since(start).Round(time.Second),
		nodeSummary(sb.DOKS.Pools(), "base"), res.peakPrice)

	// Watch evictions from here: the shrink deletes pods but evicts none.
	pw := newPodWatch()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	pw.watch(watchCtx, sb)

	// Shrink to a third, keeping the pods spread over as many nodes as before.
	if err := shrinkSpread(ctx, sb); err != nil {
		return res, err
	}
	shrunk := time.Now()
	for _, w := range consolidationWorkloads {
		if err := waitExactlyRunning(ctx, sb, w.name, w.grow/3, cc.timeout); err != nil {
			return res, failed(err)
		}
	}
	fmt.Fprintf(out, "  %5s: shrunk to a third: %s, $%.4f an hour\n", time.Since(start).Round(time.Second),
		nodeSummary(sb.DOKS.Pools(), "base"), clusterPrice(sb.DOKS.Pools(), "base"))

	// Settle: PDBs watched, every change to the pools' nodes or the pods' placement
	// restarts the window.
	pw.arm()
	last, lastChange := "", time.Now()
	err = poll(ctx, cc.timeout, time.Second, func() (bool, error) {
		pods, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		sig := clusterSignature(sb.DOKS.Pools(), pods.Items)
		if sig != last {
			last, lastChange = sig, time.Now()
			fmt.Fprintf(out, "  %5s: %s, $%.4f an hour\n", time.Since(start).Round(time.Second),
				nodeSummary(sb.DOKS.Pools(), "base"), clusterPrice(sb.DOKS.Pools(), "base"))
		}
		return time.Since(lastChange) >= cc.settle, nil
	})
	res.settled = err == nil
	if err != nil && ctx.Err() != nil {
		return res, err
	}
	res.settle = lastChange.Sub(shrunk)
	stopWatch()

	pods, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	res.price = clusterPrice(sb.DOKS.Pools(), "base")
	res.nodes = nodeSummary(sb.DOKS.Pools(), "base")
	cpu, mem := podRequests(pods.Items)
	res.bound, res.binds = lowerBound(cpu, mem, consolidationSizes)
	res.tally = pw.tally(shrunk, pods.Items)
	res.pdbViolations = pw.pdbViolations()
	for _, l := range sb.DOKS.PoolHistory() {
		if l.ByAPI {
			res.createdPools++
		}
	}
	return res, nil
}

// writeConsolidationCloudConfig allows the run's sizes for pools on demand.
func writeConsolidationCloudConfig(sb *sandbox.Sandbox, dir string) (string, error) {
	raw, err := json.Marshal(map[string]any{
		"cluster_id": sb.ClusterID, "token_file": sb.TokenPath, "url": sb.DOKS.URL(),
		"autoprovisioning": map[string]any{"sizes": consolidationSizes, "max_nodes_per_pool": 10},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cloud-consolidation.json")
	return path, os.WriteFile(path, raw, 0o600)
}

func createConsolidationWorkload(ctx context.Context, sb *sandbox.Sandbox, w consolidationWorkload) error {
	return createBenchDeployment(ctx, sb, w.name, w.cpu, w.mem, w.grow, w.maxUnavailable)
}

// createBenchDeployment creates a Deployment of pause pods with requests
// cpu and mem in the bench namespace and, when maxUnavailable is not 0, its
// PodDisruptionBudget.
func createBenchDeployment(ctx context.Context, sb *sandbox.Sandbox, name, cpu, mem string, replicas, maxUnavailable int) error {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To(int64(1)),
				Containers: []apiv1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
						apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(mem)}}}},
			}},
		},
	}
	if _, err := sb.Kube.AppsV1().Deployments("bench").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if maxUnavailable == 0 {
		return nil
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(int32(maxUnavailable))),
			Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	_, err := sb.Kube.PolicyV1().PodDisruptionBudgets("bench").Create(ctx, pdb, metav1.CreateOptions{})
	return err
}

// deletionCostKey ranks the pods a ReplicaSet deletes first when it shrinks (lowest first).
const deletionCostKey = "controller.kubernetes.io/pod-deletion-cost"

// shrinkSpread scales every workload to a third, choosing the pods that stay so that
// as many nodes as can keep a pod do: the nodes end part empty rather than empty.
func shrinkSpread(ctx context.Context, sb *sandbox.Sandbox) error {
	pods, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	quota := map[string]int{}
	for _, w := range consolidationWorkloads {
		quota[w.name] = w.grow / 3
	}
	keep := chooseKeepers(pods.Items, quota)
	for _, p := range pods.Items {
		cost := "0" // a ReplicaSet deletes the lowest cost first
		if keep[p.Name] {
			cost = "1"
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := sb.Kube.CoreV1().Pods("bench").Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[deletionCostKey] = cost
			_, err = sb.Kube.CoreV1().Pods("bench").Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return err
		}
	}
	for _, w := range consolidationWorkloads {
		if err := scaleDeployment(ctx, sb, w.name, int32(quota[w.name])); err != nil {
			return err
		}
	}
	return nil
}

// chooseKeepers picks quota[app] pods of each app to stay, spread over as many nodes
// as it can: round after round, each node (by name) keeps one more of its pods (the
// first by name whose app still has quota), until every quota is met.
func chooseKeepers(pods []apiv1.Pod, quota map[string]int) map[string]bool {
	left := maps.Clone(quota)
	byNode := map[string][]apiv1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	nodes := slices.Sorted(maps.Keys(byNode))
	for _, n := range nodes {
		slices.SortFunc(byNode[n], func(a, b apiv1.Pod) int { return strings.Compare(a.Name, b.Name) })
	}
	keep := map[string]bool{}
	for progress := true; progress; {
		progress = false
		for _, n := range nodes {
			for i, p := range byNode[n] {
				if app := p.Labels["app"]; left[app] > 0 {
					keep[p.Name] = true
					left[app]--
					byNode[n] = slices.Delete(byNode[n], i, i+1)
					progress = true
					break
				}
			}
		}
	}
	return keep
}

// waitExactlyRunning waits until app has n pods, all running, none terminating.
func waitExactlyRunning(ctx context.Context, sb *sandbox.Sandbox, app string, n int, timeout time.Duration) error {
	var got int
	err := poll(ctx, timeout, 200*time.Millisecond, func() (bool, error) {
		l, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		got = len(l.Items)
		return got == n && readyOf(l.Items, app) == n, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %d pods, want %d running: %w", app, got, n, err)
	}
	return nil
}

// readyOf counts app's pods that are Ready and not terminating: those a PDB counts healthy.
func readyOf(pods []apiv1.Pod, app string) int {
	n := 0
	for i := range pods {
		p := &pods[i]
		if p.Labels["app"] != app || p.DeletionTimestamp != nil || p.Status.Phase != apiv1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == apiv1.PodReady && c.Status == apiv1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// clusterPrice is the hourly price of every node DigitalOcean lists in the pools but
// skip, at the catalogue's price of its pool's size: a node is billed until it is gone,
// draining or deleting included.
func clusterPrice(pools []godo.KubernetesNodePool, skip string) float64 {
	total := 0.0
	for _, p := range pools {
		if p.Name == skip {
			continue
		}
		price, _ := doks.SizePrice(p.Size)
		total += price * float64(len(p.Nodes))
	}
	return total
}

// nodeSummary counts the listed nodes by size, e.g. "1 × s-8vcpu-16gb, 2 × s-2vcpu-2gb".
func nodeSummary(pools []godo.KubernetesNodePool, skip string) string {
	bySize := map[string]int{}
	for _, p := range pools {
		if p.Name != skip && len(p.Nodes) > 0 {
			bySize[p.Size] += len(p.Nodes)
		}
	}
	if len(bySize) == 0 {
		return "no nodes"
	}
	var sizes []string
	for s := range bySize {
		sizes = append(sizes, s)
	}
	sort.Strings(sizes)
	var parts []string
	for _, s := range sizes {
		parts = append(parts, fmt.Sprintf("%d × %s", bySize[s], s))
	}
	return strings.Join(parts, ", ")
}

// podRequests sums the CPU (milli-cores) and memory (bytes) the live pods request.
func podRequests(pods []apiv1.Pod) (milliCPU, memBytes int64) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			milliCPU += c.Resources.Requests.Cpu().MilliValue()
			memBytes += c.Resources.Requests.Memory().Value()
		}
	}
	return milliCPU, memBytes
}

// lowerBound is what no packing of the requests can beat: the cheapest price per
// allocatable vCPU among the sizes times the vCPUs requested, and the same for memory
// (per allocatable GiB); the larger of the two binds. Nodes come whole and pods do not
// split, so a real cluster costs more; the bound ignores it and so is reachable only by
// a perfect fit.
func lowerBound(milliCPU, memBytes int64, sizes []string) (bound float64, binds string) {
	perCPU, perGiB := math.Inf(1), math.Inf(1)
	for _, s := range sizes {
		price, ok := doks.SizePrice(s)
		_, alloc, ok2 := doks.SizeResources(s)
		if !ok || !ok2 {
			continue
		}
		perCPU = min(perCPU, price/(float64(alloc.Cpu().MilliValue())/1000))
		perGiB = min(perGiB, price/(float64(alloc.Memory().Value())/(1<<30)))
	}
	byCPU := perCPU * float64(milliCPU) / 1000
	byMem := perGiB * float64(memBytes) / (1 << 30)
	if byMem > byCPU {
		return byMem, "memory"
	}
	return byCPU, "vCPU"
}

// clusterSignature changes when a node comes or goes, a node changes state, or a pod
// comes, goes or moves: the run has settled when it stays the same.
func clusterSignature(pools []godo.KubernetesNodePool, pods []apiv1.Pod) string {
	var parts []string
	for _, p := range pools {
		for _, n := range p.Nodes {
			state := ""
			if n.Status != nil {
				state = n.Status.State
			}
			parts = append(parts, p.Name+"/"+n.Name+"="+state)
		}
	}
	for _, p := range pods {
		parts = append(parts, string(p.UID)+"@"+p.Spec.NodeName)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// pdbTracker counts the moments a PDB is exceeded: more of its pods down (not Ready or
// terminating) than its maxUnavailable allows, each run of consecutive observations
// counted once.
type pdbTracker struct {
	over       map[string]bool
	violations int
}

func (t *pdbTracker) observe(pdb string, down, maxUnavailable int) {
	if t.over == nil {
		t.over = map[string]bool{}
	}
	over := down > maxUnavailable
	if over && !t.over[pdb] {
		t.violations++
	}
	t.over[pdb] = over
}

// podWatch records the bench pods the Eviction API evicted: the API server marks
// each with the DisruptionTarget condition (reason EvictionByEvictionAPI) as it deletes
// it, whoever asked.
type podWatch struct {
	mu      sync.Mutex
	evicted map[string]time.Time // pod UID → its creation
	// After arm, every pod event checks each PDB against the pods the watch holds, so a
	// moment over the budget is seen however short.
	armed bool
	pdbs  pdbTracker
	store cache.Store
}

func newPodWatch() *podWatch { return &podWatch{evicted: map[string]time.Time{}} }

// arm starts the PDB checks: the workloads are at their settled size.
func (w *podWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = true
}

// checkPDBsLocked observes every workload under a PDB: its replicas less its pods Ready.
func (w *podWatch) checkPDBsLocked() {
	if !w.armed || w.store == nil {
		return
	}
	var pods []apiv1.Pod
	for _, obj := range w.store.List() {
		if p, ok := obj.(*apiv1.Pod); ok {
			pods = append(pods, *p)
		}
	}
	for _, wl := range consolidationWorkloads {
		if wl.maxUnavailable > 0 {
			w.pdbs.observe(wl.name, wl.grow/3-readyOf(pods, wl.name), wl.maxUnavailable)
		}
	}
}

func (w *podWatch) pdbViolations() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pdbs.violations
}

func (w *podWatch) watch(ctx context.Context, sb *sandbox.Sandbox) {
	factory := informers.NewSharedInformerFactoryWithOptions(sb.Kube, 0, informers.WithNamespace("bench"))
	inf := factory.Core().V1().Pods().Informer()
	w.store = inf.GetStore()
	see := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if p, ok := obj.(*apiv1.Pod); ok && evictedByAPI(p) {
			w.evicted[string(p.UID)] = p.CreationTimestamp.Time
		}
		w.checkPDBsLocked()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, n any) { see(n) }, DeleteFunc: see})
	factory.Start(ctx.Done())
}

func evictedByAPI(p *apiv1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == apiv1.DisruptionTarget && c.Status == apiv1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			return true
		}
	}
	return false
}

// evictionTally is what the evictions of the run did to the workload.
type evictionTally struct {
	// evicted: pods evicted after the shrink.
	evicted int
	// moved: pods running at the end created after the shrink. The workload does not
	// change after it, so each such pod replaces one that was evicted (or lost with its
	// node): a replica moved.
	moved int
	// twice: evicted pods created after the shrink, each a replacement of an evicted
	// pod: a replica moved a second time.
	twice int
}

func (w *podWatch) tally(shrunk time.Time, end []apiv1.Pod) evictionTally {
	w.mu.Lock()
	defer w.mu.Unlock()
	return tallyEvictions(w.evicted, shrunk, end)
}

// tallyEvictions counts from the evicted pods' creation times and the pods at the end.
// Creation times have a resolution of a second: a pod created in the second of the
// shrink counts as created before it.
func tallyEvictions(evicted map[string]time.Time, shrunk time.Time, end []apiv1.Pod) evictionTally {
	var t evictionTally
	after := func(created time.Time) bool { return created.After(shrunk.Truncate(time.Second)) }
	for _, created := range evicted {
		t.evicted++
		if after(created) {
			t.twice++
		}
	}
	for _, p := range end {
		if p.DeletionTimestamp == nil && after(p.CreationTimestamp.Time) {
			t.moved++
		}
	}
	return t
}
