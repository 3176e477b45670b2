// Command bench measures the autoscaler end to end on the local DOKS sandbox and prints
// the figures: DigitalOcean API calls in steady state, how fast a burst of pending pods
// gets nodes (and whether more than needed were asked for), and how fast they go again.
//
//	CA_BINARY=bin/cluster-autoscaler go run ./hack/bench [--pools 10 --pods 60 ...]
//
// It asserts nothing: it reports.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

type config struct {
	pools, pods, maxPerPool int
	scanInterval, bootDelay time.Duration
	unneeded, idle, timeout time.Duration
	dir                     string
}

func main() {
	var c config
	flag.IntVar(&c.pools, "pools", 10, "autoscaled node pools (each starts at 1 node, min 1)")
	flag.IntVar(&c.pods, "pods", 60, "pods in the burst; each needs a node of its own")
	flag.IntVar(&c.maxPerPool, "max-per-pool", 10, "max_nodes of each pool")
	flag.DurationVar(&c.scanInterval, "scan-interval", 2*time.Second, "autoscaler --scan-interval")
	flag.DurationVar(&c.bootDelay, "boot-delay", 2*time.Second, "simulated droplet boot time")
	flag.DurationVar(&c.unneeded, "scale-down-unneeded-time", 10*time.Second, "autoscaler --scale-down-unneeded-time")
	flag.DurationVar(&c.idle, "idle", 20*time.Second, "steady-state window for counting API calls")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up on a phase after this long")
	flag.StringVar(&c.dir, "dir", "", "directory for sandbox files and the autoscaler log (default: a temp dir)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	if c.pools < 1 || c.pods < 1 || c.maxPerPool < 1 {
		return fmt.Errorf("--pools, --pods and --max-per-pool must be positive")
	}
	if c.pods > c.pools*c.maxPerPool {
		return fmt.Errorf("%d pods need more nodes than %d pools × %d can give", c.pods, c.pools, c.maxPerPool)
	}
	if c.dir == "" {
		tmp, err := os.MkdirTemp("", "ca-bench-")
		if err != nil {
			return err
		}
		c.dir = tmp
	}
	binary := os.Getenv("CA_BINARY")
	if binary == "" {
		binary = filepath.Join(c.dir, "cluster-autoscaler")
		fmt.Fprintln(out, "building the autoscaler (set CA_BINARY to skip)...")
		if err := sandbox.BuildAutoscaler(".", binary); err != nil {
			return err
		}
	}
	var pools []doks.PoolSpec
	for i := 0; i < c.pools; i++ {
		pools = append(pools, doks.PoolSpec{Name: fmt.Sprintf("pool-%02d", i+1), Size: "s-2vcpu-4gb", Count: 1,
			AutoScale: true, MinNodes: 1, MaxNodes: c.maxPerPool})
	}
	t0 := time.Now()
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "sandbox"), BootDelay: c.bootDelay, Pools: pools})
	if err != nil {
		return err
	}
	defer sb.Stop()
	startup := time.Since(t0)
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return err
	}
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false",
		"--scan-interval="+c.scanInterval.String(), "--scale-down-unneeded-time="+c.unneeded.String(),
		"--scale-down-delay-after-add="+c.unneeded.String(), "--scale-down-delay-after-delete=0s",
		"--max-empty-bulk-delete=100", "--address=127.0.0.1:0", "--v=2")
	ca, err := sandbox.RunAutoscaler(binary, args, filepath.Join(c.dir, "autoscaler.log"))
	if err != nil {
		return err
	}
	defer ca.Stop(15 * time.Second)
	fmt.Fprintf(out, "sandbox with %d pools up in %v; autoscaler log %s\n", c.pools, startup.Round(time.Millisecond), ca.LogPath)

	// Steady state: nothing to do, so every call is the cost of watching.
	if err := sleep(ctx, c.idle/4); err != nil { // first loops fetch templates
		return err
	}
	lists0, total0 := sb.DOKS.RequestCount(doks.OpListNodePools), sb.DOKS.TotalRequests()
	if err := sleep(ctx, c.idle); err != nil {
		return err
	}
	lists, total := sb.DOKS.RequestCount(doks.OpListNodePools)-lists0, sb.DOKS.TotalRequests()-total0
	loops := float64(c.idle) / float64(c.scanInterval)

	// Burst: pods that each need a node; the pools' one node each takes c.pools of them.
	needed := c.pods - c.pools
	if needed < 0 {
		needed = 0
	}
	updates0 := sb.DOKS.RequestCount(doks.OpUpdateNodePool)
	burst := time.Now()
	if err := createDeployment(ctx, sb, c.pods); err != nil {
		return err
	}
	var firstUpdate, allRequested, allRunning time.Duration
	maxTargets := 0
	err = poll(ctx, c.timeout, func() (bool, error) {
		sum := targetSum(sb)
		if sum > maxTargets {
			maxTargets = sum
		}
		if firstUpdate == 0 && sb.DOKS.RequestCount(doks.OpUpdateNodePool) > updates0 {
			firstUpdate = time.Since(burst)
		}
		if allRequested == 0 && sum >= c.pools+needed {
			allRequested = time.Since(burst)
		}
		running, err := runningPods(ctx, sb)
		if err != nil {
			return false, err
		}
		if running == c.pods {
			allRunning = time.Since(burst)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("burst: %w (see %s)", err, ca.LogPath)
	}
	updates := sb.DOKS.RequestCount(doks.OpUpdateNodePool) - updates0

	// Scale-down: every added node becomes empty.
	if err := scaleDeployment(ctx, sb, 0); err != nil {
		return err
	}
	drop := time.Now()
	deletes0 := sb.DOKS.RequestCount(doks.OpDeleteNode)
	err = poll(ctx, c.timeout, func() (bool, error) { return targetSum(sb) == c.pools, nil })
	if err != nil {
		return fmt.Errorf("scale-down: %w (see %s)", err, ca.LogPath)
	}
	down := time.Since(drop)
	deletes := sb.DOKS.RequestCount(doks.OpDeleteNode) - deletes0

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nfigure\tvalue\n")
	fmt.Fprintf(w, "pools / pods in burst / nodes needed\t%d / %d / %d\n", c.pools, c.pods, needed)
	fmt.Fprintf(w, "steady state: DO API calls per loop\t%.2f (list %.2f) over %d calls in %v\n", float64(total)/loops, float64(lists)/loops, total, c.idle)
	fmt.Fprintf(w, "burst: first pool update after\t%v\n", firstUpdate.Round(10*time.Millisecond))
	fmt.Fprintf(w, "burst: all needed nodes requested after\t%v\n", allRequested.Round(10*time.Millisecond))
	fmt.Fprintf(w, "burst: all pods running after\t%v (boot delay %v)\n", allRunning.Round(10*time.Millisecond), c.bootDelay)
	fmt.Fprintf(w, "burst: pool update calls\t%d\n", updates)
	fmt.Fprintf(w, "burst: overshoot (nodes asked beyond need)\t%d\n", maxTargets-(c.pools+needed))
	fmt.Fprintf(w, "scale-down: all pools back at min after\t%v (unneeded time %v)\n", down.Round(10*time.Millisecond), c.unneeded)
	fmt.Fprintf(w, "scale-down: delete-node calls\t%d\n", deletes)
	return w.Flush()
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v", timeout)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func targetSum(sb *sandbox.Sandbox) int {
	sum := 0
	for _, p := range sb.DOKS.Pools() {
		sum += p.Count
	}
	return sum
}

func runningPods(ctx context.Context, sb *sandbox.Sandbox) (int, error) {
	l, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=burst"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == apiv1.PodRunning {
			n++
		}
	}
	return n, nil
}

func createDeployment(ctx context.Context, sb *sandbox.Sandbox, replicas int) error {
	labels := map[string]string{"app": "burst"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: "bench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1500m")}}}}},
			},
		},
	}
	_, err := sb.Kube.AppsV1().Deployments("bench").Create(ctx, d, metav1.CreateOptions{})
	return err
}

func scaleDeployment(ctx context.Context, sb *sandbox.Sandbox, replicas int32) error {
	sc, err := sb.Kube.AppsV1().Deployments("bench").GetScale(ctx, "burst", metav1.GetOptions{})
	if err != nil {
		return err
	}
	sc.Spec.Replicas = replicas
	_, err = sb.Kube.AppsV1().Deployments("bench").UpdateScale(ctx, "burst", sc, metav1.UpdateOptions{})
	return err
}
