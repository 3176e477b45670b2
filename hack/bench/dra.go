package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// draGPUSize is the size of the --dra run's GPU pools: eight NVIDIA H100s a node, so that
// 100 nodes hold 300 one-GPU claims (the sandbox's other NVIDIA sizes have one GPU).
const draGPUSize = "gpu-h100x8-640gb"

// draGPUTaint is the taint DOKS puts on its GPU pools' nodes (the simulator adds it to
// pools created through its API, not to those a sandbox starts with): the claim pods
// tolerate it, the figures run's pods do not and stay on the CPU nodes.
const draGPUTaint = "nvidia.com/gpu"

// checkDRA validates the --dra flags: the GPU nodes are whole pools, at least one pool
// stays a CPU pool, and the claims fit on the GPUs.
func (c config) checkDRA() error {
	if !c.dra {
		return nil
	}
	_, _, perNode := doks.SizeGPU(draGPUSize)
	switch {
	case c.draGPUNodes < c.nodesPerPool || c.draGPUNodes%c.nodesPerPool != 0:
		return fmt.Errorf("--dra-gpu-nodes=%d must be a positive multiple of --nodes-per-pool=%d (whole pools)", c.draGPUNodes, c.nodesPerPool)
	case c.draGPUNodes/c.nodesPerPool >= c.pools:
		return fmt.Errorf("--dra-gpu-nodes=%d leaves no CPU pool of the %d pools", c.draGPUNodes, c.pools)
	case c.draClaimPods < 0 || c.draClaimPods > c.draGPUNodes*perNode:
		return fmt.Errorf("--dra-claim-pods=%d: between 0 and the %d GPUs of %d %s nodes", c.draClaimPods, c.draGPUNodes*perNode, c.draGPUNodes, draGPUSize)
	}
	return nil
}

// runDRA is the scale figures on issue 23's cluster (--dra): "the same 1,000-node cluster
// with 100 GPU nodes publishing slices and 300 claim pods". A sandbox in DRA mode (NVIDIA's
// driver installed) has c.pools pools, of which c.draGPUNodes/c.nodesPerPool are
// draGPUSize pools tainted as DOKS taints them, all grown to c.nodesPerPool nodes; every
// GPU node has published its ResourceSlice. The pods are the figures run's (c.pools +
// c.trials fillers of 1500m, which there fill the first nodes and the trials' new ones,
// and c.smallPods of 50m) plus c.draClaimPods pods of 50m each holding a ResourceClaim
// for one GPU, allocated by kube-scheduler. Then a freshly started c.binary is measured as
// scaleFigures measures it, and printed beside plain (this project's scale figures from
// the figures run; nil when there were none) with the ratios.
func runDRA(ctx context.Context, c config, out io.Writer, plain *scaleRun) error {
	gpuPools := c.draGPUNodes / c.nodesPerPool
	pools := cpuPools(c.pools-gpuPools, c.nodesPerPool)
	for i := 0; i < gpuPools; i++ {
		pools = append(pools, doks.PoolSpec{Name: fmt.Sprintf("gpu-%02d", i+1), Size: draGPUSize, Count: 1,
			AutoScale: true, MinNodes: 1, MaxNodes: c.nodesPerPool + 10,
			Taints: []godo.Taint{{Key: draGPUTaint, Effect: string(apiv1.TaintEffectNoSchedule)}}})
	}
	want := c.pools * c.nodesPerPool
	fmt.Fprintf(out, "\ndra: starting a sandbox in DRA mode (%s) with %d pools, %d of them %s...\n", gpudriver.NVIDIA, c.pools, gpuPools, draGPUSize)
	t0 := time.Now()
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "dra-sandbox"), BootDelay: c.bootDelay, Pools: pools,
		Agent: nodeagent.Options{DRADrivers: []string{gpudriver.NVIDIA}}})
	if err != nil {
		return err
	}
	defer sb.Stop()
	fmt.Fprintf(out, "sandbox up in %v; growing to %d nodes, %d of them GPU nodes...\n", time.Since(t0).Round(time.Millisecond), want, c.draGPUNodes)
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return err
	}
	if err := createClaimTemplate(ctx, sb, "one-gpu", gpudriver.NVIDIA); err != nil {
		return err
	}
	r := &rows{}
	nodes, took, err := growPools(ctx, sb, c.nodesPerPool, c.timeout)
	if err != nil {
		return fmt.Errorf("only %d of %d nodes registered in %v: %w", nodes, want, c.timeout, err)
	}
	published, err := waitSlices(ctx, sb, c.draGPUNodes, c.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d nodes registered in %v, %d ResourceSlices published; creating %d filler, %d small and %d claim pods...\n",
		nodes, took.Round(time.Second), published, c.pools+c.trials, c.smallPods, c.draClaimPods)
	for _, d := range []struct {
		app  string
		n    int
		spec apiv1.PodSpec
	}{
		{"filler", c.pools + c.trials, podSpec("1500m")},
		{"small", c.smallPods, podSpec("50m")},
		{"claim", c.draClaimPods, claimPodSpec("one-gpu")},
	} {
		if d.n == 0 {
			continue
		}
		if err := createDeploymentOf(ctx, sb, d.app, d.n, d.spec); err != nil {
			return err
		}
		if err := waitRunning(ctx, sb, d.app, d.n, c.timeout); err != nil {
			fmt.Fprintf(out, "%s pods: %v; measuring with what runs\n", d.app, err)
		}
	}
	pods, err := runningPodsOf(ctx, sb, "filler", "small", "claim")
	if err != nil {
		return err
	}
	claims, allocated, err := countClaims(ctx, sb)
	if err != nil {
		return err
	}
	r.add("sandbox at scale", "%d nodes in %d pools registered in %v, %d pods running; %d of the nodes %s with a ResourceSlice each, %d pods holding a claim (%d of %d claims allocated)",
		nodes, c.pools, took.Round(time.Second), pods, c.draGPUNodes, draGPUSize, c.draClaimPods, allocated, claims)

	cd := c
	if c.profileDir != "" {
		cd.profileDir = filepath.Join(c.profileDir, "dra")
	}
	ca, addr, err := startAutoscaler(cd, sb, "autoscaler-dra.log")
	if err != nil {
		return err
	}
	defer ca.Stop(30 * time.Second)
	fmt.Fprintf(out, "autoscaler at %d nodes with claims (log %s); measuring for %v...\n", nodes, ca.LogPath, c.window)
	s, err := measureSteady(ctx, cd, out, sb, ca, addr, want)
	s.add(r, c, want)
	if err != nil {
		r.add("run ended early", "%v", err)
	}
	without := &rows{}
	if plain != nil {
		without.add("sandbox at scale", "%s", plain.cluster)
		plain.s.add(without, c, want)
	} else {
		without.add("sandbox at scale", "not measured (--figures=false, --skip-scale or the figures run ended early)")
	}
	if perr := printTable(out, "figure (--dra)", []string{"without claims (figures run)", "with claims"}, []*rows{without, r}); perr != nil {
		return perr
	}
	if plain != nil {
		fmt.Fprintf(out, "with claims / without: %s (issue 23: within 1.5x)\n", draRatios(plain.s, s))
	}
	return err
}

// draRatios is the --dra run's figures divided by the plain run's: mean iteration time,
// CPU per iteration, RSS.
func draRatios(plain, dra steady) string {
	ratio := func(a, b float64) string {
		if a <= 0 || b <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	return fmt.Sprintf("mean iteration time %s, CPU per iteration %s, RSS %s",
		ratio(float64(dra.mean()), float64(plain.mean())),
		ratio(float64(dra.cpuPerIter), float64(plain.cpuPerIter)),
		ratio(float64(dra.mem.rss), float64(plain.mem.rss)))
}

// createClaimTemplate creates a ResourceClaimTemplate in namespace bench asking for one
// device of class.
func createClaimTemplate(ctx context.Context, sb *sandbox.Sandbox, name, class string) error {
	_, err := sb.Kube.ResourceV1().ResourceClaimTemplates("bench").Create(ctx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			}}},
		}}},
	}, metav1.CreateOptions{})
	return err
}

// claimPodSpec is a 50m pod claiming one GPU from the ResourceClaimTemplate named
// template, tolerating the GPU nodes' taint.
func claimPodSpec(template string) apiv1.PodSpec {
	spec := podSpec("50m")
	spec.Tolerations = []apiv1.Toleration{{Key: draGPUTaint, Operator: apiv1.TolerationOpExists, Effect: apiv1.TaintEffectNoSchedule}}
	spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}
	spec.Containers[0].Resources.Claims = []apiv1.ResourceClaim{{Name: "gpu"}}
	return spec
}

// waitSlices waits until the NVIDIA driver has published at least want ResourceSlices
// (one a GPU node) and returns how many there are.
func waitSlices(ctx context.Context, sb *sandbox.Sandbox, want int, timeout time.Duration) (int, error) {
	n := 0
	err := poll(ctx, timeout, 2*time.Second, func() (bool, error) {
		l, err := sb.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		n = 0
		for _, s := range l.Items {
			if s.Spec.Driver == gpudriver.NVIDIA {
				n++
			}
		}
		return n >= want, nil
	})
	if err != nil {
		return n, fmt.Errorf("%d of %d ResourceSlices published: %w", n, want, err)
	}
	return n, nil
}

// countClaims counts the ResourceClaims in namespace bench, and those allocated and
// reserved for a pod.
func countClaims(ctx context.Context, sb *sandbox.Sandbox) (total, allocated int, err error) {
	l, err := sb.Kube.ResourceV1().ResourceClaims("bench").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for _, rc := range l.Items {
		if rc.DeletionTimestamp != nil {
			continue
		}
		total++
		if rc.Status.Allocation != nil && len(rc.Status.ReservedFor) > 0 {
			allocated++
		}
	}
	return total, allocated, nil
}
