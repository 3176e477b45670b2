package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// runLarge is the 5,000-node scenario (--large): c.largePools pools of
// c.largeNodesPerPool nodes, c.largePods running pods filling every node; then, for each
// binary of c.builds in turn on that same cluster, a freshly started autoscaler's first
// and steady iterations, and c.largePending pods that need new nodes, created at once:
// how long until the first UpdateNodePool. Between two binaries the pending pods go and
// the pools are set back, so that each finds the cluster as the first did.
//
// Every node runs two 900m pods (1,800m of an s-2vcpu-4gb's 1,900m allocatable), so a
// pending 500m pod fits no existing node and three fit a new one.
func runLarge(ctx context.Context, c config, out io.Writer) error {
	var pools []doks.PoolSpec
	for i := 0; i < c.largePools; i++ {
		p := doks.PoolSpec{Name: fmt.Sprintf("pool-%03d", i+1), Size: "s-2vcpu-4gb", Count: 1,
			AutoScale: true, MinNodes: 1, MaxNodes: c.largeNodesPerPool + 10}
		if *consolidatePools {
			p.Tags = []string{digitalocean.TagConsolidate}
		}
		pools = append(pools, p)
	}
	want := c.largePools * c.largeNodesPerPool
	fmt.Fprintf(out, "\nlarge: starting a sandbox with %d pools, growing to %d nodes...\n", c.largePools, want)
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "large-sandbox"), BootDelay: c.bootDelay, Pools: pools})
	if err != nil {
		return err
	}
	defer sb.Stop()
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return err
	}
	nodes, register, err := growPools(ctx, sb, c.largeNodesPerPool, c.largeTimeout)
	if err != nil {
		r := &rows{}
		r.add("large scenario", "skipped: only %d of %d nodes registered in %v", nodes, want, c.largeTimeout)
		return printTable(out, "figure (--large)", []string{"sandbox"}, []*rows{r})
	}
	fmt.Fprintf(out, "%d nodes registered in %v; creating %d running pods...\n", nodes, register.Round(time.Second), c.largePods)
	begin := time.Now()
	spec, how := podSpec("900m"), "bound by kube-scheduler"
	if !c.largeSchedulerBinds {
		spec.SchedulerName, how = harnessBinder, "bound by the harness"
		perNode := (c.largePods + nodes - 1) / nodes
		go func() {
			if err := bindPods(ctx, sb, "large", c.largePods, perNode, c.largeTimeout); err != nil {
				fmt.Fprintf(out, "binding the running pods: %v\n", err)
			}
		}()
	}
	if err := createDeploymentOf(ctx, sb, "large", c.largePods, spec); err != nil {
		return err
	}
	if err := waitRunningProgress(ctx, out, sb, "large", c.largePods, c.largeTimeout); err != nil {
		fmt.Fprintf(out, "running pods: %v; measuring with what runs\n", err)
	}
	settle := time.Since(begin)
	running, err := runningPods(ctx, sb, "large")
	if err != nil {
		return err
	}

	var runs []*rows
	var failed error
	for i, b := range c.builds {
		if i > 0 {
			fmt.Fprintf(out, "setting the cluster back for %s...\n", b.name)
			if err := resetLarge(ctx, c, sb, want); err != nil {
				failed = err
				break
			}
		}
		r := &rows{}
		r.add("sandbox at scale", "%d nodes in %d pools registered in %v; %d pods (%s) running %v after they were created",
			nodes, c.largePools, register.Round(time.Second), running, how, settle.Round(time.Second))
		cb := c
		cb.binary, cb.dir = b.path, b.dir
		fmt.Fprintf(out, "large: %s at %d nodes, %d pods running; measuring for %v...\n", b.name, nodes, running, c.window)
		if err := largeRun(ctx, cb, out, sb, want, r); err != nil {
			r.add("run ended early", "%v", err)
			failed = fmt.Errorf("large, %s: %w", b.name, err)
		}
		runs = append(runs, r)
	}
	if err := printTable(out, "figure (--large)", c.buildNames()[:len(runs)], runs); err != nil {
		return err
	}
	return failed
}

// largeRun measures one binary on the large cluster: steady iterations, then the pending
// pods. The autoscaler is stopped when it returns.
func largeRun(ctx context.Context, c config, out io.Writer, sb *sandbox.Sandbox, nodes int, r *rows) error {
	ca, addr, err := startAutoscaler(c, sb, "autoscaler-large.log")
	if err != nil {
		return err
	}
	defer ca.Stop(30 * time.Second)
	s, err := measureSteady(ctx, c, out, sb, ca, addr, nodes)
	s.add(r, c, nodes)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "creating %d pending pods...\n", c.largePending)
	profDone := make(chan error, 1)
	if c.profileDir != "" {
		// The loops that act on the pending pods, from their creation on.
		path := filepath.Join(c.profileDir, fmt.Sprintf("cpu-pending-%d.pprof", nodes))
		go func() { profDone <- savePprof(addr, "profile?seconds=30", path) }()
		defer func() {
			if err := <-profDone; err != nil {
				fmt.Fprintf(out, "pending-pod profile: %v\n", err)
			} else {
				fmt.Fprintf(out, "pending-pod profile: %s\n", path)
			}
		}()
	}
	p, err := measurePending(ctx, c, sb)
	p.add(r, c.largePending, c.timeout)
	return err
}

// pending is what measurePending measured.
type pending struct {
	first, last time.Time // first create call started, last one returned
	update      time.Time // first UpdateNodePool arrived; zero: none
	// When the scheduler marked pods unschedulable (PodScheduled False), as the
	// harness's watch saw it: the first, and how many by the first UpdateNodePool.
	firstMarked    time.Time
	markedByUpdate int
	requests       int // DigitalOcean requests from the first pod to the first update
	limited        int // of which answered 429 by the rate limit
}

func (p pending) add(r *rows, n int, timeout time.Duration) {
	name := fmt.Sprintf("%d pending pods → first UpdateNodePool", n)
	if p.update.IsZero() {
		r.add(name, "none within %v of the last pod's creation (%d requests, %d answered 429)", timeout, p.requests, p.limited)
		return
	}
	if p.update.Before(p.last) {
		r.add(name, "%v after the first was created, while they were still being created (all created in %v)",
			p.update.Sub(p.first).Round(time.Millisecond), p.last.Sub(p.first).Round(time.Millisecond))
	} else {
		r.add(name, "%v after the first was created, %v after the last (all created in %v)",
			p.update.Sub(p.first).Round(time.Millisecond), p.update.Sub(p.last).Round(time.Millisecond), p.last.Sub(p.first).Round(time.Millisecond))
	}
	marked := "none"
	if !p.firstMarked.IsZero() {
		marked = fmt.Sprintf("the first %v after the first was created", p.firstMarked.Sub(p.first).Round(time.Millisecond))
	}
	r.add("… pods the scheduler had marked unschedulable by then", "%d of %d; %s", p.markedByUpdate, n, marked)
	r.add("… DO API requests until then", "%d (%d answered 429 by the rate limit)", p.requests, p.limited)
}

// measurePending creates c.largePending pods at once and waits up to c.timeout after the
// last for the first UpdateNodePool, watching meanwhile when the scheduler marks them
// unschedulable: the autoscaler acts only on pods so marked.
func measurePending(ctx context.Context, c config, sb *sandbox.Sandbox) (pending, error) {
	var p pending
	var mu sync.Mutex
	marked := map[string]bool{}
	stop := make(chan struct{})
	defer close(stop)
	factory := informers.NewSharedInformerFactoryWithOptions(sb.Kube, 0, informers.WithNamespace("bench"),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=large-pending" }))
	inf := factory.Core().V1().Pods().Informer()
	onPod := func(obj any) {
		pod, ok := obj.(*apiv1.Pod)
		if !ok || !unschedulable(pod) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !marked[pod.Name] {
			marked[pod.Name] = true
			if p.firstMarked.IsZero() {
				p.firstMarked = time.Now()
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, o any) { onPod(o) }}); err != nil {
		return p, err
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	updates0, total0, limited0 := acceptedUpdates(sb), sb.DOKS.TotalRequests(), sb.DOKS.RateLimited("")
	var update atomic.Int64 // unix nanos of the first UpdateNodePool
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for acceptedUpdates(sb) == updates0 {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
		update.Store(time.Now().UnixNano())
		mu.Lock()
		p.markedByUpdate = len(marked)
		p.requests, p.limited = sb.DOKS.TotalRequests()-total0, sb.DOKS.RateLimited("")-limited0
		mu.Unlock()
	}()
	var err error
	p.first, p.last, err = createPendingPods(ctx, sb, c.largePending)
	if err != nil {
		return p, err
	}
	select {
	case <-polled:
	case <-time.After(c.timeout):
	case <-ctx.Done():
		return p, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	if ns := update.Load(); ns > 0 {
		p.update = time.Unix(0, ns)
	} else {
		p.requests, p.limited = sb.DOKS.TotalRequests()-total0, sb.DOKS.RateLimited("")-limited0
	}
	return p, nil
}

func unschedulable(pod *apiv1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.PodScheduled && c.Status == apiv1.ConditionFalse && c.Reason == apiv1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// resetLarge puts the cluster back as the first binary found it: the pending pods
// deleted, every pool back at c.largeNodesPerPool nodes (DOKS removes the newest, the
// ones the scale-up added), and then a minute without requests so that the per-minute
// rate limit starts empty for the next binary as it did for the first.
func resetLarge(ctx context.Context, c config, sb *sandbox.Sandbox, want int) error {
	// One by one, 16 at a time: a DeleteCollection of 5,000 pods outlasts the apiserver's
	// request timeout on this machine.
	l, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=large-pending", ResourceVersion: "0"})
	if err != nil {
		return err
	}
	zero := int64(0)
	workqueue.ParallelizeUntil(ctx, 16, len(l.Items), func(i int) {
		_ = sb.Kube.CoreV1().Pods("bench").Delete(ctx, l.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	for _, p := range sb.DOKS.Pools() {
		if p.Count != c.largeNodesPerPool {
			if err := resizePool(ctx, sb, p, c.largeNodesPerPool, c.largeNodesPerPool+10); err != nil {
				return err
			}
		}
	}
	err = poll(ctx, c.largeTimeout, 2*time.Second, func() (bool, error) {
		l, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		n, err := countPods(ctx, sb, "large-pending")
		return err == nil && len(l.Items) == want && n.total == 0, err
	})
	if err != nil {
		return fmt.Errorf("setting the cluster back: %w", err)
	}
	return sleep(ctx, time.Minute+time.Second)
}

// harnessBinder is the schedulerName of the large scenario's running pods unless
// --large-scheduler-binds: no scheduler serves it, bindPods binds them.
const harnessBinder = "bench-harness-binder"

// bindPods binds the pods of app, as its ReplicaSet creates them, perNode to a node, in
// node name order, through the pods/binding subresource as a scheduler does (the API
// sets PodScheduled), until want are bound. It stands in for kube-scheduler for the
// cluster's steady-state pods only: at 5,000 nodes the scheduler's scoring
// (PodTopologySpread's PreScore counts matching pods on every node for every pod) bound
// 3-18 pods a second with the fraction of this shared machine it got.
func bindPods(ctx context.Context, sb *sandbox.Sandbox, app string, want, perNode int, timeout time.Duration) error {
	nodeList, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	var names []string
	for _, n := range nodeList.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return poll(ctx, timeout, 2*time.Second, func() (bool, error) {
		l, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		used := map[string]int{}
		var unbound []*apiv1.Pod
		for i := range l.Items {
			if p := &l.Items[i]; p.Spec.NodeName != "" {
				used[p.Spec.NodeName]++
			} else if p.DeletionTimestamp == nil {
				unbound = append(unbound, p)
			}
		}
		var slots []string
		for _, n := range names {
			for k := used[n]; k < perNode; k++ {
				slots = append(slots, n)
			}
		}
		if len(l.Items)-len(unbound) >= want {
			return true, nil
		}
		if len(unbound) > len(slots) {
			unbound = unbound[:len(slots)]
		}
		workqueue.ParallelizeUntil(ctx, 16, len(unbound), func(i int) {
			p := unbound[i]
			b := &apiv1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID}, Target: apiv1.ObjectReference{Kind: "Node", Name: slots[i]}}
			// A failed binding is retried on the next pass, to a free slot then.
			_ = sb.Kube.CoreV1().Pods("bench").Bind(ctx, b, metav1.CreateOptions{})
		})
		return false, nil
	})
}

// createPendingPods creates n pods of 500m with 16 clients in parallel and returns when
// the first call started and the last one returned.
func createPendingPods(ctx context.Context, sb *sandbox.Sandbox, n int) (first, last time.Time, err error) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	first = time.Now()
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pending-%05d", i), Namespace: "bench",
					Labels: map[string]string{"app": "large-pending"}}, Spec: podSpec("500m")}
				if _, cerr := sb.Kube.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{}); cerr != nil {
					mu.Lock()
					err = cerr
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first, time.Now(), err
}

// podCounts counts the pods labelled app=<app> in namespace bench by how far they got.
type podCounts struct{ total, bound, running int }

func countPods(ctx context.Context, sb *sandbox.Sandbox, app string) (podCounts, error) {
	var n podCounts
	l, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: "0"})
	if err != nil {
		return n, err
	}
	for i := range l.Items {
		p := &l.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		n.total++
		if p.Spec.NodeName != "" {
			n.bound++
		}
		if p.Status.Phase == apiv1.PodRunning {
			n.running++
		}
	}
	return n, nil
}

// waitRunningProgress is waitRunning printing, every 30s, how many pods exist, are bound
// and run: at thousands of pods, which component is slow shows there.
func waitRunningProgress(ctx context.Context, out io.Writer, sb *sandbox.Sandbox, app string, want int, timeout time.Duration) error {
	begin, last := time.Now(), time.Now()
	var n podCounts
	// Every 5s: each poll lists (and the apiserver encodes) every pod of the app.
	err := poll(ctx, timeout, 5*time.Second, func() (bool, error) {
		var err error
		if n, err = countPods(ctx, sb, app); err != nil {
			return false, err
		}
		if time.Since(last) >= 30*time.Second {
			last = time.Now()
			fmt.Fprintf(out, "  %v: %d pods created, %d bound, %d running\n", time.Since(begin).Round(time.Second), n.total, n.bound, n.running)
		}
		return n.running >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d %s pods running (%d created, %d bound): %w", n.running, want, app, n.total, n.bound, err)
	}
	return nil
}
