package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/controlplane"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

func TestParsePools(t *testing.T) {
	tests := []struct {
		spec    string
		want    []doks.PoolSpec
		wantErr string
	}{
		{spec: "workers:s-2vcpu-4gb:1:1-5,fixed:s-2vcpu-4gb:1", want: []doks.PoolSpec{
			{Name: "workers", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 5},
			{Name: "fixed", Size: "s-2vcpu-4gb", Count: 1},
		}},
		{spec: " zero:s-1vcpu-2gb:0:0-3 ", want: []doks.PoolSpec{{Name: "zero", Size: "s-1vcpu-2gb", Count: 0, AutoScale: true, MaxNodes: 3}}},
		{spec: "", wantErr: "no pools"},
		{spec: "a:s-2vcpu-4gb", wantErr: "want name:size:count"},
		{spec: "a:no-such-size:1", wantErr: "unknown size"},
		{spec: "a:s-2vcpu-4gb:-1", wantErr: "non-negative"},
		{spec: "a:s-2vcpu-4gb:1:5", wantErr: "not min-max"},
		{spec: "a:s-2vcpu-4gb:1:3-2", wantErr: "0 <= min <= max"},
		{spec: "a:s-2vcpu-4gb:9:1-5", wantErr: "outside 1-5"},
		{spec: "a:s-2vcpu-4gb:1,a:s-2vcpu-4gb:1", wantErr: "used twice"},
		{spec: ":s-2vcpu-4gb:1", wantErr: "name and size"},
	}
	for _, tc := range tests {
		got, err := ParsePools(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParsePools(%q) error %v, want one containing %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePools(%q): %v", tc.spec, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("ParsePools(%q) = %+v, want %+v", tc.spec, got, tc.want)
			continue
		}
		for i := range got {
			g, w := got[i], tc.want[i]
			if g.Name != w.Name || g.Size != w.Size || g.Count != w.Count || g.AutoScale != w.AutoScale || g.MinNodes != w.MinNodes || g.MaxNodes != w.MaxNodes {
				t.Errorf("ParsePools(%q)[%d] = %+v, want %+v", tc.spec, i, g, w)
			}
		}
	}
}

func TestSandboxStartsWithPoolsAndFiles(t *testing.T) {
	start := time.Now()
	sb, err := Start(Options{
		BootDelay: 100 * time.Millisecond,
		Pools: []doks.PoolSpec{
			{Name: "workers", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 5},
			{Name: "fixed", Size: "s-1vcpu-2gb", Count: 2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := sb.Dir
	t.Logf("sandbox with 3 nodes up in %v (control plane %v)", time.Since(start), sb.ControlPlane.Timings.Total)

	var cc CloudConfig
	data, err := os.ReadFile(sb.CloudConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cc); err != nil {
		t.Fatalf("cloud-config is not JSON: %v", err)
	}
	if cc.ClusterID != sb.ClusterID || cc.URL != sb.DOKS.URL() || cc.TokenFile != sb.TokenPath {
		t.Errorf("cloud-config %+v does not match the sandbox", cc)
	}
	if tok, err := os.ReadFile(cc.TokenFile); err != nil || strings.TrimSpace(string(tok)) == "" {
		t.Errorf("token file unreadable or empty: %v", err)
	}
	if _, err := os.Stat(sb.KubeconfigPath); err != nil {
		t.Errorf("kubeconfig: %v", err)
	}

	// The API as the autoscaler sees it: the pool grows, a Node follows.
	pool, _ := sb.Pool("workers")
	if _, _, err := sb.GodoClient().Kubernetes.UpdateNodePool(context.Background(), sb.ClusterID, pool.ID,
		&godo.KubernetesNodePoolUpdateRequest{Count: ptr.To(2)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sb.WaitForNodes(ctx, "workers", 2); err != nil {
		t.Fatal(err)
	}

	sb.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s left behind after Stop", dir)
	}
}

func TestSandboxOnSharedControlPlaneCleansUpItsNodes(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	for round := 0; round < 2; round++ {
		sb, err := Start(Options{ControlPlane: cp, BootDelay: 50 * time.Millisecond,
			Pools: []doks.PoolSpec{{Name: "shared", Size: "s-1vcpu-2gb", Count: 2}}})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		sb.Stop()
		nodes, err := cp.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("control plane unusable after a sandbox stopped: %v", err)
		}
		if len(nodes.Items) != 0 {
			t.Fatalf("round %d: %d nodes left after Stop", round, len(nodes.Items))
		}
	}
}

// In DRA mode the sandbox plays DOKS's NVIDIA DRA driver: GPU nodes advertise no
// nvidia.com/gpu, the driver's DeviceClass is installed, each GPU node gets its
// ResourceSlice (unless its pool's slices are held), and a Job whose pod claims a GPU
// through a ResourceClaimTemplate runs there: the resourceclaim controller makes the
// claim, the kube-scheduler allocates it, the Job controller makes the pod.
func TestDRAModeRunsAClaimingJobOnTheGPUNode(t *testing.T) {
	sb, err := Start(Options{
		BootDelay: 50 * time.Millisecond,
		Agent:     nodeagent.Options{DRADrivers: []string{gpudriver.NVIDIA}},
		Pools:     []doks.PoolSpec{{Name: "gpu", Size: "gpu-h100x1-80gb", Count: 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := sb.Kube

	// A node whose driver has not published yet: Ready, no devices.
	sb.Agent.HoldSlices("gpu")
	pool, _ := sb.Pool("gpu")
	if _, _, err := sb.GodoClient().Kubernetes.UpdateNodePool(ctx, sb.ClusterID, pool.ID,
		&godo.KubernetesNodePoolUpdateRequest{Count: ptr.To(1)}); err != nil {
		t.Fatal(err)
	}
	if err := sb.WaitForNodes(ctx, "gpu", 1); err != nil {
		t.Fatal(err)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeagent.LabelNodePool + "=gpu"})
	if err != nil {
		t.Fatal(err)
	}
	node := nodes.Items[0]
	if q, ok := node.Status.Allocatable["nvidia.com/gpu"]; ok {
		t.Errorf("GPU node advertises nvidia.com/gpu=%s: the DRA driver replaces the device plugin", q.String())
	}
	if node.Labels[nodeagent.LabelGPUBrand] != "nvidia" {
		t.Errorf("GPU node labels %v: want %s=nvidia", node.Labels, nodeagent.LabelGPUBrand)
	}
	if _, err := kube.ResourceV1().DeviceClasses().Get(ctx, gpudriver.NVIDIA, metav1.GetOptions{}); err != nil {
		t.Fatalf("DeviceClass %s: %v", gpudriver.NVIDIA, err)
	}

	if _, err := kube.ResourceV1().ResourceClaimTemplates("default").Create(ctx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-h100"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: gpudriver.NVIDIA,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"}}},
			}}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec: batchv1.JobSpec{Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{
			RestartPolicy:  apiv1.RestartPolicyNever,
			Containers:     []apiv1.Container{{Name: "train", Image: "train", Resources: apiv1.ResourceRequirements{Claims: []apiv1.ResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-h100")}},
		}}},
	}
	if _, err := kube.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobPod := func() (*apiv1.Pod, error) {
		for {
			pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
			if err == nil && len(pods.Items) == 1 {
				return &pods.Items[0], nil
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("job pod: %v", ctx.Err())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	pod, err := jobPod()
	if err != nil {
		t.Fatal(err)
	}
	// The claim exists, made from the template, and cannot be allocated: no slice yet.
	for len(pod.Status.ResourceClaimStatuses) == 0 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		if ctx.Err() != nil {
			t.Fatalf("the resourceclaim controller made no claim for %s: %+v", pod.Name, pod.Status)
		}
		time.Sleep(50 * time.Millisecond)
		if pod, err = jobPod(); err != nil {
			t.Fatal(err)
		}
	}
	if pod.Spec.NodeName != "" {
		t.Fatalf("pod bound to %s before the node's driver published a device", pod.Spec.NodeName)
	}
	slices, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil || len(slices.Items) != 0 {
		t.Fatalf("slices while held: %v (err %v)", slices, err)
	}

	sb.Agent.ReleaseSlices("gpu")
	for pod.Status.Phase != apiv1.PodRunning {
		if ctx.Err() != nil {
			t.Fatalf("claim pod never ran once the slice was published: %+v", pod.Status)
		}
		time.Sleep(50 * time.Millisecond)
		if pod, err = jobPod(); err != nil {
			t.Fatal(err)
		}
	}
	if pod.Spec.NodeName != node.Name {
		t.Errorf("claim pod runs on %s, want the GPU node %s", pod.Spec.NodeName, node.Name)
	}
	slices, err = kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil || len(slices.Items) != 1 {
		t.Fatalf("want one slice, got %v (err %v)", slices, err)
	}
	s := slices.Items[0]
	if s.Spec.Driver != gpudriver.NVIDIA || *s.Spec.NodeName != node.Name || s.Spec.Pool.Name != node.Name || len(s.Spec.Devices) != 1 {
		t.Errorf("slice %+v: want one %s device of node %s in a pool named after it", s.Spec, gpudriver.NVIDIA, node.Name)
	}
	if _, ok := s.Spec.Devices[0].Attributes["uuid"]; !ok {
		t.Errorf("device attributes %v: want the driver's uuid", s.Spec.Devices[0].Attributes)
	}
	claim, err := kube.ResourceV1().ResourceClaims("default").Get(ctx, *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil || claim.Status.Allocation == nil || claim.Status.Allocation.Devices.Results[0].Device != "gpu-0" {
		t.Errorf("claim %v: want it allocated to gpu-0 (err %v)", claim, err)
	}

	// The droplet goes: its slice goes with its Node.
	if _, _, err := sb.GodoClient().Kubernetes.UpdateNodePool(ctx, sb.ClusterID, pool.ID,
		&godo.KubernetesNodePoolUpdateRequest{Count: ptr.To(0)}); err != nil {
		t.Fatal(err)
	}
	if err := sb.WaitForNodes(ctx, "gpu", 0); err != nil {
		t.Fatal(err)
	}
	for {
		slices, err = kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err == nil && len(slices.Items) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("slice of a removed node left behind: %v", slices.Items)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
