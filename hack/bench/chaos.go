package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

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

// The chaos run (issue 31): workload churn with pools on demand while a share of the
// writes to DigitalOcean is applied but answered 504 or not at all, the listings lag the
// creates, and the leader is killed at mid-run. Everything is measured from outside the
// autoscaler: the simulator's pool history and request counts, a watch on the Nodes, and
// the eviction events on the pods. Its bad figures must be zero.

const (
	// chaosClassKey is the nodeSelector key of the churned workloads: one label value per
	// workload, so each needs node pools of its own (the autoscaler creates a pool per
	// size and per nodeSelector label set).
	chaosClassKey = "chaos.bench/class"
	// chaosUnneeded is --scale-down-unneeded-time of the run: short beside the churn step,
	// so that pools are deleted and created again within the run.
	chaosUnneeded = 30 * time.Second
	// chaosStep is how often the workloads change.
	chaosStep = time.Minute
)

// chaosClasses are the churned workloads; each needs pools of its own.
var chaosClasses = []string{"a", "b", "c"}

// chaosCPUs are the pod sizes a workload is given; a new size rolls the Deployment out
// and may need a pool of another droplet size (the cheapest per pod changes with it).
var chaosCPUs = []string{"300m", "900m", "1800m"}

// chaosWrites are the writes to DigitalOcean the faults meet.
var chaosWrites = []string{doks.OpCreateNodePool, doks.OpDeleteNodePool, doks.OpDeleteNode, doks.OpUpdateNodePool}

type chaosConfig struct {
	duration   time.Duration
	seed       uint64
	faultShare float64       // of the writes, applied then answered 504 (half) or cut (half)
	listLag    time.Duration // how long a created pool stays out of the listings
}

// chaosWatch records what the watchers saw during the run.
type chaosWatch struct {
	mu sync.Mutex
	// untainted: nodes whose ToBeDeleted taint was removed while DigitalOcean listed
	// them draining or deleting (name → when).
	untainted map[string]time.Time
}

func runChaos(ctx context.Context, c config, out io.Writer) error {
	cc := c.chaos
	rng := mrand.New(mrand.NewPCG(cc.seed, 1))
	dir := filepath.Join(c.dir, "chaos")
	fmt.Fprintf(out, "chaos: %v of churn, seed %d, %.0f%% of writes applied then lost, listing lag %v; files in %s\n",
		cc.duration, cc.seed, cc.faultShare*100, cc.listLag, dir)
	// The one hand-made pool holds nothing of the churn: every churned pod selects a
	// class label no hand-made pool carries.
	sb, err := sandbox.Start(sandbox.Options{Dir: dir, BootDelay: 3 * time.Second, DeleteDelay: 4 * time.Second,
		Pools: []doks.PoolSpec{{Name: "base", Size: "s-2vcpu-4gb", Count: 1}}})
	if err != nil {
		return err
	}
	defer sb.Stop()
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return err
	}
	cloudConfig, err := writeChaosCloudConfig(sb, dir)
	if err != nil {
		return err
	}

	w := &chaosWatch{untainted: map[string]time.Time{}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w.watchNodes(watchCtx, sb)

	for _, class := range chaosClasses {
		if err := createChaosWorkload(ctx, sb, class); err != nil {
			return err
		}
	}

	// Faults from here on: the pools above were made without the API.
	sb.DOKS.SetListLag(cc.listLag)
	for i, op := range chaosWrites {
		half := cc.faultShare / 2
		sb.DOKS.InjectFault(doks.Fault{Operation: op, Status: 504, Applied: true, Fraction: half, Seed: cc.seed + uint64(2*i)})
		// The second fault sees only what the first let through: half of the share of that.
		sb.DOKS.InjectFault(doks.Fault{Operation: op, Cut: true, Applied: true, Fraction: half / (1 - half), Seed: cc.seed + uint64(2*i+1)})
	}

	args := append(sb.AutoscalerArgs(), "--cloud-config="+cloudConfig, "--namespace=bench", "--address=127.0.0.1:0",
		"--node-autoprovisioning-enabled", "--expander=price", "--scan-interval=5s",
		"--scale-down-unneeded-time="+chaosUnneeded.String(), "--scale-down-delay-after-add=0s",
		"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=1s", fmt.Sprintf("--v=%d", c.verbosity))
	replicas := map[string]*sandbox.Process{}
	startReplica := func(name string) error {
		p, err := sandbox.RunAutoscaler(c.binary, args, filepath.Join(dir, "autoscaler-"+name+".log"))
		if err != nil {
			return err
		}
		replicas[name] = p
		return nil
	}
	defer func() {
		for _, p := range replicas {
			p.Stop(15 * time.Second)
		}
	}()
	for _, name := range []string{"1", "2"} {
		if err := startReplica(name); err != nil {
			return err
		}
	}

	start := time.Now()
	writesAt := []map[string]int{chaosWriteCounts(sb)}
	killAt := start.Add(cc.duration / 2)
	killed, killedName := false, ""
	var tookOver time.Duration
	for step := 0; time.Since(start) < cc.duration; step++ {
		for _, class := range chaosClasses {
			n := rng.IntN(5) // 0 to 4 pods; 0 empties the class's pools
			cpu := chaosCPUs[rng.IntN(len(chaosCPUs))]
			if err := setChaosWorkload(ctx, sb, class, int32(n), cpu); err != nil {
				return err
			}
			fmt.Fprintf(out, "chaos %5s: %s → %d × %s\n", time.Since(start).Round(time.Second), class, n, cpu)
		}
		stepEnd := start.Add(time.Duration(step+1) * chaosStep)
		if stepEnd.After(start.Add(cc.duration)) {
			stepEnd = start.Add(cc.duration)
		}
		if !killed && killAt.Before(stepEnd) {
			if err := sleep(ctx, time.Until(killAt)); err != nil {
				return err
			}
			killedName, tookOver, err = killLeader(ctx, replicas, startReplica)
			if err != nil {
				return err
			}
			killed = true
			fmt.Fprintf(out, "chaos %5s: killed leader replica %s (SIGKILL); the other led %v later; replica %s started\n",
				time.Since(start).Round(time.Second), killedName, tookOver.Round(100*time.Millisecond), killedName+"b")
		}
		if err := sleep(ctx, time.Until(stepEnd)); err != nil {
			return err
		}
		writesAt = append(writesAt, chaosWriteCounts(sb))
	}
	churnEnd := time.Now()

	// Wind down: no workload, so every created pool must go within the unneeded time and
	// a few loops, faults and lag still on.
	for _, class := range chaosClasses {
		if err := setChaosWorkload(ctx, sb, class, 0, chaosCPUs[0]); err != nil {
			return err
		}
	}
	windDown := chaosUnneeded + 3*time.Minute
	fmt.Fprintf(out, "chaos %5s: churn over; every workload at 0, waiting up to %v for the created pools to go\n",
		time.Since(start).Round(time.Second), windDown)
	_ = poll(ctx, windDown, time.Second, func() (bool, error) {
		return len(liveCreatedPools(sb.DOKS.PoolHistory())) == 0, nil
	})
	end := time.Now()
	stopWatch()

	history := sb.DOKS.PoolHistory()
	created, needed := poolsCreatedNeeded(history, end)
	orphans := liveCreatedPools(history)
	evictedTwice, evictions, err := podsEvictedTwice(ctx, sb)
	if err != nil {
		return err
	}
	w.mu.Lock()
	untainted := len(w.untainted)
	var untaintedNames []string
	for n := range w.untainted {
		untaintedNames = append(untaintedNames, n)
	}
	w.mu.Unlock()
	sort.Strings(untaintedNames)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nchaos figure\tvalue\n")
	fmt.Fprintf(tw, "churn\t%v, %d workloads changed every %v (seed %d), leader killed at %v (replica %s), the other leading %v later\n",
		churnEnd.Sub(start).Round(time.Second), len(chaosClasses), chaosStep, cc.seed,
		killAt.Sub(start).Round(time.Second), killedName, tookOver.Round(100*time.Millisecond))
	fmt.Fprintf(tw, "faults\t%.0f%% of writes applied then lost (half 504, half cut): %s; listing lag %v\n",
		cc.faultShare*100, faultedSummary(sb), cc.listLag)
	fmt.Fprintf(tw, "pools created / needed\t%d / %d (needed: distinct runs of one size and class with a live pool)\n", created, needed)
	fmt.Fprintf(tw, "orphan pools\t%d%s\n", len(orphans), listed(orphans))
	fmt.Fprintf(tw, "nodes untainted while DigitalOcean deleted them\t%d%s\n", untainted, listed(untaintedNames))
	fmt.Fprintf(tw, "pods evicted twice\t%d (of %d pods evicted)\n", evictedTwice, evictions)
	fmt.Fprintf(tw, "DigitalOcean writes per minute\t%s\n", writesPerMinute(writesAt, churnEnd.Sub(start)))
	fmt.Fprintf(tw, "wind-down\tcreated pools gone %v after the churn (limit %v)\n", end.Sub(churnEnd).Round(time.Second), windDown)
	if err := tw.Flush(); err != nil {
		return err
	}

	var bad []string
	if created > needed {
		bad = append(bad, fmt.Sprintf("%d pools created beyond need", created-needed))
	}
	if len(orphans) > 0 {
		bad = append(bad, fmt.Sprintf("%d orphan pools", len(orphans)))
	}
	if untainted > 0 {
		bad = append(bad, fmt.Sprintf("%d nodes untainted while deleting", untainted))
	}
	if evictedTwice > 0 {
		bad = append(bad, fmt.Sprintf("%d pods evicted twice", evictedTwice))
	}
	if len(bad) > 0 {
		return fmt.Errorf("chaos: %s (logs in %s)", strings.Join(bad, ", "), dir)
	}
	return nil
}

// writeChaosCloudConfig writes the sandbox's cloud config with an autoprovisioning
// section: Basic sizes, pools large enough that no workload outgrows one.
func writeChaosCloudConfig(sb *sandbox.Sandbox, dir string) (string, error) {
	raw, err := json.Marshal(map[string]any{
		"cluster_id": sb.ClusterID, "token_file": sb.TokenPath, "url": sb.DOKS.URL(),
		"autoprovisioning": map[string]any{"sizes": []string{"s-*"}, "max_nodes_per_pool": 8},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cloud-chaos.json")
	return path, os.WriteFile(path, raw, 0o600)
}

// createChaosWorkload creates a class's Deployment at 0 pods, under a PDB allowing one
// pod down at a time.
func createChaosWorkload(ctx context.Context, sb *sandbox.Sandbox, class string) error {
	app := "churn-" + class
	labels := map[string]string{"app": app}
	spec := podSpec(chaosCPUs[0])
	spec.NodeSelector = map[string]string{chaosClassKey: class}
	spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "bench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := sb.Kube.AppsV1().Deployments("bench").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "bench"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	_, err := sb.Kube.PolicyV1().PodDisruptionBudgets("bench").Create(ctx, pdb, metav1.CreateOptions{})
	return err
}

// setChaosWorkload sets a class's pod count and CPU request.
func setChaosWorkload(ctx context.Context, sb *sandbox.Sandbox, class string, replicas int32, cpu string) error {
	deps := sb.Kube.AppsV1().Deployments("bench")
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deps.Get(ctx, "churn-"+class, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		d.Spec.Template.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse(cpu)
		_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}

// killLeader kills the replica whose log says it leads (SIGKILL, as a crash), waits for
// the other to say it leads, and starts a new replica in the killed one's place.
func killLeader(ctx context.Context, replicas map[string]*sandbox.Process, start func(string) error) (string, time.Duration, error) {
	leads := func(p *sandbox.Process) bool {
		raw, _ := os.ReadFile(p.LogPath)
		return strings.Contains(string(raw), "this replica is the leader")
	}
	var leader string
	for name, p := range replicas {
		if p.Running() && leads(p) {
			leader = name
		}
	}
	if leader == "" {
		return "", 0, fmt.Errorf("no replica's log says it is the leader")
	}
	replicas[leader].Kill()
	killed := time.Now()
	var took time.Duration
	err := poll(ctx, time.Minute, 100*time.Millisecond, func() (bool, error) {
		for name, p := range replicas {
			if name != leader && p.Running() && leads(p) {
				took = time.Since(killed)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return leader, 0, fmt.Errorf("no replica took over after the leader was killed: %w", err)
	}
	delete(replicas, leader)
	return leader, took, start(leader + "b")
}

// watchNodes records every node whose ToBeDeleted taint is removed while DigitalOcean
// lists its droplet draining or deleting: a node put back into service while it goes.
func (w *chaosWatch) watchNodes(ctx context.Context, sb *sandbox.Sandbox) {
	factory := informers.NewSharedInformerFactory(sb.Kube, 0)
	inf := factory.Core().V1().Nodes().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		oldNode, ok1 := oldObj.(*apiv1.Node)
		newNode, ok2 := newObj.(*apiv1.Node)
		if !ok1 || !ok2 || !hasTaint(oldNode, toBeDeletedTaint) || hasTaint(newNode, toBeDeletedTaint) {
			return
		}
		if st := doNodeState(sb, newNode.Name); st == doks.StateDraining || st == doks.StateDeleting {
			w.mu.Lock()
			w.untainted[newNode.Name] = time.Now()
			w.mu.Unlock()
		}
	}})
	factory.Start(ctx.Done())
}

func hasTaint(n *apiv1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t apiv1.Taint) bool { return t.Key == key })
}

// doNodeState is the state DigitalOcean gives the node's droplet ("" when it has none).
func doNodeState(sb *sandbox.Sandbox, name string) string {
	for _, p := range sb.DOKS.Pools() {
		for _, n := range p.Nodes {
			if n.Name == name && n.Status != nil {
				return n.Status.State
			}
		}
	}
	return ""
}

// podsEvictedTwice counts the pods (by UID) the autoscaler evicted more than once,
// from its eviction events ("deleting pod for node scale down"), each counted as often
// as the event's count says.
func podsEvictedTwice(ctx context.Context, sb *sandbox.Sandbox) (twice, evicted int, err error) {
	evs, err := sb.Kube.CoreV1().Events("bench").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	twice, evicted = countEvictions(evs.Items)
	return twice, evicted, nil
}

func countEvictions(evs []apiv1.Event) (twice, evicted int) {
	per := map[string]int32{}
	for _, e := range evs {
		if e.InvolvedObject.Kind != "Pod" || e.Reason != "ScaleDown" || e.Message != "deleting pod for node scale down" {
			continue
		}
		per[string(e.InvolvedObject.UID)] += max(e.Count, 1)
	}
	for _, n := range per {
		if n > 1 {
			twice++
		}
	}
	return twice, len(per)
}

// liveCreatedPools are the names of the pools created through the API (the autoscaler
// creates no other) that no DELETE has reached.
func liveCreatedPools(h []doks.PoolLife) []string {
	var out []string
	for _, l := range h {
		if l.ByAPI && l.Deleted.IsZero() {
			out = append(out, l.Name)
		}
	}
	return out
}

// poolsCreatedNeeded counts the pools created through the API, and the pools needed:
// for each droplet size and class label, the runs of time during which at least one
// such pool was live (created, no DELETE accepted yet). Two pools of one size and class
// live at once, which no workload of this run needs, count as one need.
func poolsCreatedNeeded(h []doks.PoolLife, end time.Time) (created, needed int) {
	type span struct{ from, to time.Time }
	byNeed := map[string][]span{}
	for _, l := range h {
		if !l.ByAPI {
			continue
		}
		created++
		to := l.Deleted
		if to.IsZero() {
			to = end
		}
		key := l.Size + "/" + l.Labels[chaosClassKey]
		byNeed[key] = append(byNeed[key], span{l.Created, to})
	}
	for _, spans := range byNeed {
		sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
		var reach time.Time
		for i, s := range spans {
			if i == 0 || s.from.After(reach) {
				needed++
			}
			if s.to.After(reach) {
				reach = s.to
			}
		}
	}
	return created, needed
}

func chaosWriteCounts(sb *sandbox.Sandbox) map[string]int {
	out := map[string]int{}
	for _, op := range chaosWrites {
		out[op] = sb.DOKS.RequestCount(op)
	}
	return out
}

// writesPerMinute gives each write operation's mean rate over the churn and the most
// sent in one churn step.
func writesPerMinute(at []map[string]int, d time.Duration) string {
	var parts []string
	for _, op := range chaosWrites {
		total := at[len(at)-1][op] - at[0][op]
		most := 0
		for i := 1; i < len(at); i++ {
			most = max(most, at[i][op]-at[i-1][op])
		}
		parts = append(parts, fmt.Sprintf("%s %.1f (most %d in a step)", op, float64(total)/d.Minutes(), most))
	}
	return strings.Join(parts, ", ")
}

func faultedSummary(sb *sandbox.Sandbox) string {
	var parts []string
	for _, op := range chaosWrites {
		parts = append(parts, fmt.Sprintf("%s %d of %d", op, sb.DOKS.Faulted(op), sb.DOKS.RequestCount(op)))
	}
	return strings.Join(parts, ", ")
}

func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}
