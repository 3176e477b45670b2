package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
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

// runBurst is the burst and scale-down scenario: pods that each need a node arrive at
// once; then they all go and the added nodes are removed.
func runBurst(ctx context.Context, c config, out io.Writer) error {
	if c.burstPools < 1 || c.pods < 1 || c.maxPerPl < 1 {
		return fmt.Errorf("--burst-pools, --burst-pods and --burst-max-per-pool must be positive")
	}
	if c.pods > c.burstPools*c.maxPerPl {
		return fmt.Errorf("%d pods need more nodes than %d pools × %d can give", c.pods, c.burstPools, c.maxPerPl)
	}
	var pools []doks.PoolSpec
	for i := 0; i < c.burstPools; i++ {
		pools = append(pools, doks.PoolSpec{Name: fmt.Sprintf("pool-%02d", i+1), Size: "s-2vcpu-4gb", Count: 1,
			AutoScale: true, MinNodes: 1, MaxNodes: c.maxPerPl})
	}
	fmt.Fprintf(out, "\nburst: starting a sandbox with %d pools...\n", c.burstPools)
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "burst-sandbox"), BootDelay: c.bootDelay, Pools: pools})
	if err != nil {
		return err
	}
	defer sb.Stop()
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return err
	}
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false",
		"--scan-interval="+c.burstScan.String(), "--scale-down-unneeded-time="+c.unneeded.String(),
		"--scale-down-delay-after-add="+c.unneeded.String(), "--scale-down-delay-after-delete=0s",
		"--max-scale-down-parallelism=100", "--address=127.0.0.1:0", "--v=2")
	ca, err := sandbox.RunAutoscaler(c.binary, args, filepath.Join(c.dir, "burst-autoscaler.log"))
	if err != nil {
		return err
	}
	defer ca.Stop(15 * time.Second)
	if err := sleep(ctx, 3*c.burstScan); err != nil { // first loops fetch templates
		return err
	}

	needed := c.pods - c.burstPools
	if needed < 0 {
		needed = 0
	}
	updates0 := sb.DOKS.RequestCount(doks.OpUpdateNodePool)
	burst := time.Now()
	if err := createDeployment(ctx, sb, "burst", c.pods, "1500m"); err != nil {
		return err
	}
	var firstUpdate, allRequested, allRunning time.Duration
	maxTargets := 0
	err = poll(ctx, c.timeout, 100*time.Millisecond, func() (bool, error) {
		sum := targetSum(sb)
		if sum > maxTargets {
			maxTargets = sum
		}
		if firstUpdate == 0 && sb.DOKS.RequestCount(doks.OpUpdateNodePool) > updates0 {
			firstUpdate = time.Since(burst)
		}
		if allRequested == 0 && sum >= c.burstPools+needed {
			allRequested = time.Since(burst)
		}
		running, err := runningPods(ctx, sb, "burst")
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
	if err := scaleDeployment(ctx, sb, "burst", 0); err != nil {
		return err
	}
	drop := time.Now()
	deletes0 := sb.DOKS.RequestCount(doks.OpDeleteNode)
	err = poll(ctx, c.timeout, 100*time.Millisecond, func() (bool, error) { return targetSum(sb) == c.burstPools, nil })
	if err != nil {
		return fmt.Errorf("scale-down: %w (see %s)", err, ca.LogPath)
	}
	down := time.Since(drop)
	deletes := sb.DOKS.RequestCount(doks.OpDeleteNode) - deletes0

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nburst figure\tvalue\n")
	fmt.Fprintf(w, "pools / pods in burst / nodes needed\t%d / %d / %d\n", c.burstPools, c.pods, needed)
	fmt.Fprintf(w, "burst: first pool update after\t%v\n", firstUpdate.Round(10*time.Millisecond))
	fmt.Fprintf(w, "burst: all needed nodes requested after\t%v\n", allRequested.Round(10*time.Millisecond))
	fmt.Fprintf(w, "burst: all pods running after\t%v (boot delay %v)\n", allRunning.Round(10*time.Millisecond), c.bootDelay)
	fmt.Fprintf(w, "burst: pool update calls\t%d\n", updates)
	fmt.Fprintf(w, "burst: overshoot (nodes asked beyond need)\t%d\n", maxTargets-(c.burstPools+needed))
	fmt.Fprintf(w, "scale-down: all pools back at min after\t%v (unneeded time %v)\n", down.Round(10*time.Millisecond), c.unneeded)
	fmt.Fprintf(w, "scale-down: delete-node calls\t%d\n", deletes)
	return w.Flush()
}

func targetSum(sb *sandbox.Sandbox) int {
	sum := 0
	for _, p := range sb.DOKS.Pools() {
		sum += p.Count
	}
	return sum
}

// runningPods counts the live, Running pods labelled app=<app> in namespace bench.
func runningPods(ctx context.Context, sb *sandbox.Sandbox, app string) (int, error) {
	l, err := sb.Kube.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: "0"})
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

func podSpec(cpu string) apiv1.PodSpec {
	return apiv1.PodSpec{Containers: []apiv1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
		Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
			apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("32Mi")}}}}}
}

func createDeployment(ctx context.Context, sb *sandbox.Sandbox, app string, replicas int, cpu string) error {
	return createDeploymentOf(ctx, sb, app, replicas, podSpec(cpu))
}

func createDeploymentOf(ctx context.Context, sb *sandbox.Sandbox, app string, replicas int, spec apiv1.PodSpec) error {
	labels := map[string]string{"app": app}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "bench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	_, err := sb.Kube.AppsV1().Deployments("bench").Create(ctx, d, metav1.CreateOptions{})
	return err
}

func scaleDeployment(ctx context.Context, sb *sandbox.Sandbox, app string, replicas int32) error {
	sc, err := sb.Kube.AppsV1().Deployments("bench").GetScale(ctx, app, metav1.GetOptions{})
	if err != nil {
		return err
	}
	sc.Spec.Replicas = replicas
	_, err = sb.Kube.AppsV1().Deployments("bench").UpdateScale(ctx, app, sc, metav1.UpdateOptions{})
	return err
}
