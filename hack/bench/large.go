package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// largeFigures are what runLarge measured.
type largeFigures struct {
	nodes, running   int
	register, settle time.Duration
	steady
	// pending: c.largePending pods that fit no existing node.
	createdIn        time.Duration // first create call → last one returned
	firstUpdate      time.Duration // first pod created → first UpdateNodePool
	afterLastCreated time.Duration // last pod created → first UpdateNodePool (negative: before)
	skipped          string
}

// runLarge is the 5,000-node scenario (--large): c.largePools pools of
// c.largeNodesPerPool nodes, c.largePods running pods filling every node, a freshly
// started autoscaler's first and steady iterations, and then c.largePending pods that
// need new nodes, created at once: how long until the first UpdateNodePool.
//
// Every node runs two 900m pods (1,800m of an s-2vcpu-4gb's 1,900m allocatable), so a
// pending 500m pod fits no existing node and three fit a new one.
func runLarge(ctx context.Context, c config, out io.Writer) error {
	var pools []doks.PoolSpec
	for i := 0; i < c.largePools; i++ {
		pools = append(pools, doks.PoolSpec{Name: fmt.Sprintf("pool-%03d", i+1), Size: "s-2vcpu-4gb", Count: 1,
			AutoScale: true, MinNodes: 1, MaxNodes: c.largeNodesPerPool + 10})
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
	f := &largeFigures{}
	f.nodes, f.register, err = growPools(ctx, sb, c.largeNodesPerPool, c.largeTimeout)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer w.Flush()
	if err != nil {
		f.skipped = fmt.Sprintf("only %d of %d nodes registered in %v", f.nodes, want, c.largeTimeout)
		f.print(w, c)
		return nil
	}
	fmt.Fprintf(out, "%d nodes registered in %v; creating %d running pods...\n", f.nodes, f.register.Round(time.Second), c.largePods)
	begin := time.Now()
	if err := createDeployment(ctx, sb, "large", c.largePods, "900m"); err != nil {
		return err
	}
	if err := waitRunning(ctx, sb, "large", c.largePods, c.largeTimeout); err != nil {
		fmt.Fprintf(out, "running pods: %v; measuring with what runs\n", err)
	}
	f.settle = time.Since(begin)
	if f.running, err = runningPods(ctx, sb, "large"); err != nil {
		return err
	}

	ca, addr, err := startAutoscaler(c, sb, "autoscaler-large.log", c.profileDir != "")
	if err != nil {
		return err
	}
	defer ca.Stop(30 * time.Second)
	fmt.Fprintf(out, "autoscaler at %d nodes, %d pods running (log %s); measuring for %v...\n", f.nodes, f.running, ca.LogPath, c.window)
	if f.steady, err = measureSteady(ctx, c, out, sb, ca, addr, f.nodes); err != nil {
		return err
	}

	fmt.Fprintf(out, "creating %d pending pods...\n", c.largePending)
	updates0 := sb.DOKS.RequestCount(doks.OpUpdateNodePool)
	var firstUpdate atomic.Int64 // unix nanos
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if sb.DOKS.RequestCount(doks.OpUpdateNodePool) > updates0 {
				firstUpdate.Store(time.Now().UnixNano())
				return
			}
			select {
			case <-stopPoll:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	first, last, err := createPendingPods(ctx, sb, c.largePending)
	if err != nil {
		close(stopPoll)
		return err
	}
	f.createdIn = last.Sub(first)
	select {
	case <-polled:
	case <-time.After(c.timeout):
		close(stopPoll)
		<-polled
	case <-ctx.Done():
		close(stopPoll)
		return ctx.Err()
	}
	if ns := firstUpdate.Load(); ns > 0 {
		at := time.Unix(0, ns)
		f.firstUpdate, f.afterLastCreated = at.Sub(first), at.Sub(last)
	}
	f.print(w, c)
	return nil
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

func (f *largeFigures) print(w io.Writer, c config) {
	fmt.Fprintf(w, "\nfigure (--large)\tvalue\n")
	if f.skipped != "" {
		fmt.Fprintf(w, "large scenario\tskipped: %s\n", f.skipped)
		return
	}
	fmt.Fprintf(w, "sandbox at scale\t%d nodes in %d pools registered in %v; %d pods running after %v\n",
		f.nodes, c.largePools, f.register.Round(time.Second), f.running, f.settle.Round(time.Second))
	fmt.Fprintf(w, "first iteration at %d nodes\tdone %v after start\n", f.nodes, f.firstIter.Round(time.Millisecond))
	f.steady.print(w, c, f.nodes)
	if f.firstUpdate == 0 {
		fmt.Fprintf(w, "%d pending pods → UpdateNodePool\tnone within %v\n", c.largePending, c.timeout)
		return
	}
	fmt.Fprintf(w, "%d pending pods → first UpdateNodePool\t%v after the first was created, %v after the last (all created in %v)\n",
		c.largePending, f.firstUpdate.Round(time.Millisecond), f.afterLastCreated.Round(time.Millisecond), f.createdIn.Round(time.Millisecond))
}
