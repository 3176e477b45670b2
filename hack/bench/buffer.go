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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// bufferPods is how many 1-CPU pods the warm-capacity figure adds: each
// needs an s-2vcpu-4gb node of its own.
const bufferPods = 2

// runBuffer is the warm-capacity figure: the time from a Deployment's new
// pods created to all Running, on a pool without a CapacityBuffer and on
// one whose buffer holds their room, with droplets that take
// --buffer-boot-delay to boot. Each pool starts with one node, full.
func runBuffer(ctx context.Context, c config, out io.Writer) error {
	pools := []doks.PoolSpec{
		{Name: "cold", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 10},
		{Name: "warm", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 10},
	}
	fmt.Fprintf(out, "\nbuffer: starting a sandbox (droplet boot %v)...\n", c.bufferBootDelay)
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "buffer-sandbox"), BootDelay: c.bufferBootDelay, Pools: pools})
	if err != nil {
		return err
	}
	defer sb.Stop()
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return err
	}
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false", "--scan-interval=2s",
		"--capacity-buffer-controller-enabled", "--capacity-buffer-pod-injection-enabled",
		"--address=127.0.0.1:0", "--v=2")
	ca, err := sandbox.RunAutoscaler(c.binary, args, filepath.Join(c.dir, "buffer-autoscaler.log"))
	if err != nil {
		return err
	}
	defer ca.Stop(15 * time.Second)
	for _, pool := range []string{"cold", "warm"} {
		if err := createPoolDeployment(ctx, sb, pool+"-fill", pool, 1, "1500m"); err != nil {
			return err
		}
		if err := createPoolDeployment(ctx, sb, pool+"-app", pool, 0, "1"); err != nil {
			return err
		}
		if err := waitRunning(ctx, sb, pool+"-fill", 1, c.timeout); err != nil {
			return err
		}
	}

	cold, err := timeToRunning(ctx, c, sb, "cold-app")
	if err != nil {
		return fmt.Errorf("without a buffer: %w (see %s)", err, ca.LogPath)
	}
	if err := createBuffer(ctx, sb, "warm", "warm-app"); err != nil {
		return err
	}
	provisioned := time.Now()
	if err := poll(ctx, c.timeout, 100*time.Millisecond, func() (bool, error) {
		n, err := readyPoolNodes(ctx, sb, "warm")
		return n == 1+bufferPods, err
	}); err != nil {
		return fmt.Errorf("the buffer's room: %w (see %s)", err, ca.LogPath)
	}
	roomAfter := time.Since(provisioned)
	warm, err := timeToRunning(ctx, c, sb, "warm-app")
	if err != nil {
		return fmt.Errorf("with a buffer: %w (see %s)", err, ca.LogPath)
	}

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nwarm capacity figure (%d new pods of 1 CPU, a node each; droplet boot %v)\tvalue\n", bufferPods, c.bufferBootDelay)
	fmt.Fprintf(w, "without a buffer: pods created → all Running\t%v\n", cold.Round(10*time.Millisecond))
	fmt.Fprintf(w, "with a CapacityBuffer of %d: pods created → all Running\t%v\n", bufferPods, warm.Round(10*time.Millisecond))
	fmt.Fprintf(w, "buffer created → its room Ready\t%v\n", roomAfter.Round(10*time.Millisecond))
	return w.Flush()
}

// timeToRunning scales app to bufferPods and returns how long its pods
// took to run.
func timeToRunning(ctx context.Context, c config, sb *sandbox.Sandbox, app string) (time.Duration, error) {
	start := time.Now()
	if err := scaleDeployment(ctx, sb, app, bufferPods); err != nil {
		return 0, err
	}
	if err := waitRunning(ctx, sb, app, bufferPods, c.timeout); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func createPoolDeployment(ctx context.Context, sb *sandbox.Sandbox, app, pool string, replicas int, cpu string) error {
	labels := map[string]string{"app": app}
	spec := podSpec(cpu)
	spec.NodeSelector = map[string]string{nodeagent.LabelNodePool: pool}
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

// createBuffer keeps room for bufferPods pods of the Deployment app.
func createBuffer(ctx context.Context, sb *sandbox.Sandbox, name, app string) error {
	b := &v1beta1.CapacityBuffer{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.APIVersion, Kind: v1beta1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
		Spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: app},
			Replicas: ptr.To[int32](bufferPods)}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(sb.ControlPlane.Config)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(v1beta1.CapacityBuffersResource).Namespace("bench").Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return err
}

// readyPoolNodes counts the pool's Ready nodes.
func readyPoolNodes(ctx context.Context, sb *sandbox.Sandbox, pool string) (int, error) {
	l, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeagent.LabelNodePool + "=" + pool, ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range l.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == apiv1.NodeReady && cond.Status == apiv1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}
