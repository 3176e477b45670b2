// Command demo shows the autoscaler at work on the local DOKS sandbox: it starts a sandbox
// (pools "workers" 1..5 and "fixed" 1), runs the production binary against it, applies a
// workload that does not fit, then removes it, and prints a timeline of what the autoscaler
// did. The story has three minutes once the binary is built, or the demo fails.
//
//	CA_BINARY=bin/cluster-autoscaler go run ./hack/demo [--keep]
//
// Without CA_BINARY it builds the binary first.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

func main() {
	keep := flag.Bool("keep", false, "keep the sandbox and the autoscaler running after the story, until Ctrl-C")
	dir := flag.String("dir", "", "directory for sandbox files and the autoscaler log (default: a temp dir)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *dir, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	out     io.Writer
	sb      *sandbox.Sandbox
	start   time.Time
	last    string
	logPath string // the autoscaler's log, read for its decisions
	logRead int64
}

// decisionMarkers pick the autoscaler's decision lines, and the pool updates that
// name the pools behind the node group IDs, out of its log; the
// per-loop "unneeded for" progress lines stay in the log file.
var decisionMarkers = []string{"Scale-up: growing node groups", "Setting node pool count", "fit no node group", "Scale-down: removing", "Scale-down: removed", "Gave up on nodes"}

// decisions prints the autoscaler's decisions logged since the last call.
func (d *demo) decisions() {
	f, err := os.Open(d.logPath)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(d.logRead, io.SeekStart); err != nil {
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return
	}
	// Only whole lines; a partial last line is read again next time.
	end := strings.LastIndexByte(string(data), '\n') + 1
	d.logRead += int64(end)
	for _, line := range strings.Split(string(data[:end]), "\n") {
		msg := line
		if i := strings.Index(line, "] "); i >= 0 {
			msg = line[i+2:] // drop klog's header
		}
		for _, m := range decisionMarkers {
			if strings.Contains(msg, m) {
				d.say("autoscaler: %s", msg)
				break
			}
		}
	}
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// state is one line describing the pools and the demo's pods.
func (d *demo) state(ctx context.Context) string {
	var parts []string
	for _, p := range d.sb.DOKS.Pools() {
		n, _ := d.sb.RegisteredNodes(ctx, p.Name)
		parts = append(parts, fmt.Sprintf("%s: target %d, nodes %d", p.Name, p.Count, n))
	}
	running, pending := d.podCounts(ctx)
	parts = append(parts, fmt.Sprintf("pods: %d running, %d pending", running, pending))
	return strings.Join(parts, " | ")
}

// nodes counts the registered Nodes of every pool.
func (d *demo) nodes(ctx context.Context) int {
	total := 0
	for _, p := range d.sb.DOKS.Pools() {
		n, _ := d.sb.RegisteredNodes(ctx, p.Name)
		total += n
	}
	return total
}

func (d *demo) podCounts(ctx context.Context) (running, pending int) {
	l, err := d.sb.Kube.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=demo"})
	if err != nil {
		return 0, 0
	}
	for _, p := range l.Items {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == apiv1.PodRunning:
			running++
		default:
			pending++
		}
	}
	return running, pending
}

// watch prints every change of state until done returns true or the timeout passes.
func (d *demo) watch(ctx context.Context, timeout time.Duration, done func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		d.decisions()
		// done is read first, so that the last state printed is one in
		// which it holds.
		finished := done()
		if s := d.state(ctx); s != d.last {
			d.say("%s", s)
			d.last = s
		}
		if finished {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func run(ctx context.Context, out io.Writer, dir string, keep bool) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "ca-demo-")
		if err != nil {
			return err
		}
		dir = tmp
	}
	binary, err := sandbox.AutoscalerBinary(dir, func() { fmt.Fprintln(out, "Building the autoscaler (set CA_BINARY to skip)...") })
	if err != nil {
		return err
	}
	pools, err := sandbox.ParsePools("workers:s-2vcpu-4gb:1:1-5,fixed:s-2vcpu-4gb:1")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "Starting the DOKS sandbox...")
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(dir, "sandbox"), Pools: pools})
	if err != nil {
		return err
	}
	defer sb.Stop()
	d := &demo{out: out, sb: sb, start: time.Now()}
	d.say("sandbox ready: kubeconfig %s, DOKS API %s", sb.KubeconfigPath, sb.DOKS.URL())
	if err := sb.ControlPlane.EnsureNamespace(ctx, "demo"); err != nil {
		return err
	}

	args := append(sb.AutoscalerArgs(), "--namespace=demo", "--leader-elect=false", "--scan-interval=2s",
		"--scale-down-unneeded-time=10s", "--scale-down-delay-after-add=10s", "--address=127.0.0.1:0", "--v=2")
	ca, err := sandbox.RunAutoscaler(binary, args, filepath.Join(dir, "autoscaler.log"))
	if err != nil {
		return err
	}
	defer ca.Stop(15 * time.Second)
	d.say("autoscaler started: %s %s", binary, strings.Join(args, " "))
	d.say("autoscaler log: %s", ca.LogPath)
	d.logPath = ca.LogPath

	// The story's clock starts here, once the binary is built and the
	// sandbox is up.
	budget := time.Now().Add(3 * time.Minute)
	start := d.nodes(ctx)
	// Six pods of 1.5 CPU: one fits on each node; two nodes exist, so four wait.
	d.say("creating Deployment demo: 6 pods × 1500m CPU (one per s-2vcpu-4gb node)")
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "demo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(6)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}},
			Template: apiv1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "demo"}},
				Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1500m")}}}}},
			},
		},
	}
	if _, err := sb.Kube.AppsV1().Deployments("demo").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	upStart := time.Now()
	if err := d.watch(ctx, time.Until(budget), func() bool { r, p := d.podCounts(ctx); return r == 6 && p == 0 }); err != nil {
		return fmt.Errorf("scale-up: %w (see %s)", err, ca.LogPath)
	}
	up := time.Since(upStart)
	peak := d.nodes(ctx)
	workers, _ := sb.Pool("workers")
	d.say("all 6 pods run after %v: workers grew to %d node(s) (max %d), %d node(s) in all",
		up.Round(100*time.Millisecond), workers.Count, workers.MaxNodes, peak)

	d.say("deleting Deployment demo")
	if err := sb.Kube.AppsV1().Deployments("demo").Delete(ctx, "demo", metav1.DeleteOptions{}); err != nil {
		return err
	}
	downStart := time.Now()
	if err := d.watch(ctx, time.Until(budget), func() bool {
		p, _ := sb.Pool("workers")
		n, _ := sb.RegisteredNodes(ctx, "workers")
		return p.Count == p.MinNodes && n == p.MinNodes
	}); err != nil {
		return fmt.Errorf("scale-down: %w (see %s)", err, ca.LogPath)
	}
	down := time.Since(downStart)
	final := d.nodes(ctx)
	d.say("workers back at its min of %d node(s) after %v (--scale-down-unneeded-time=10s)", workers.MinNodes, down.Round(100*time.Millisecond))

	fmt.Fprintf(out, "\nSummary\n  scale-up %d → %d nodes for 6 pods: %v\n  scale-down %d → %d nodes once they went: %v\n",
		start, peak, up.Round(100*time.Millisecond), peak, final, down.Round(100*time.Millisecond))
	fmt.Fprintf(out, "  DigitalOcean API calls: %d in all (list %d, update %d, delete node %d, template %d, cluster %d)\n",
		sb.DOKS.TotalRequests(), sb.DOKS.RequestCount(doks.OpListNodePools), sb.DOKS.RequestCount(doks.OpUpdateNodePool),
		sb.DOKS.RequestCount(doks.OpDeleteNode), sb.DOKS.RequestCount(doks.OpGetNodePoolTemplate), sb.DOKS.RequestCount(doks.OpGetCluster))
	fmt.Fprintf(out, "  nodes are labelled %s=<pool>; autoscaler log: %s\n", nodeagent.LabelNodePool, ca.LogPath)
	if keep {
		fmt.Fprintf(out, "\nStill running (kubectl --kubeconfig %s get nodes). Press Ctrl-C to stop.\n", sb.KubeconfigPath)
		<-ctx.Done()
	}
	return nil
}
