package digitalocean

import (
	"strings"
	"testing"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
)

func res(cpu, milli int64, mem string, pods int64) *godo.KubernetesNodePoolResources {
	return &godo.KubernetesNodePoolResources{CPU: cpu, CpuMilliCores: milli, Memory: mem, Pods: pods}
}

func TestBuildTemplateNode(t *testing.T) {
	pool := &godo.KubernetesNodePool{ID: "pool-id", Name: "workers", Size: "s-2vcpu-4gb", Labels: map[string]string{"team": "pool"}}
	cases := []struct {
		name     string
		tmpl     godo.KubernetesNodeTemplate
		wantErr  string
		cpuAlloc int64 // milli
		cpuCap   int64
		memAlloc string
		pods     int64
		gpuRes   apiv1.ResourceName
		gpus     int64
		taints   []apiv1.Taint
		labels   map[string]string
	}{
		{
			name:     "milli-cores preferred",
			tmpl:     godo.KubernetesNodeTemplate{Slug: "s-2vcpu-4gb", Capacity: res(2, 2000, "4096Mi", 110), Allocatable: res(1, 1900, "3000Mi", 110)},
			cpuAlloc: 1900, cpuCap: 2000, memAlloc: "3000Mi", pods: 110,
			labels: map[string]string{"node.kubernetes.io/instance-type": "s-2vcpu-4gb", LabelNodePool: "workers", LabelNodePoolID: "pool-id", "team": "pool"},
		},
		{
			name:     "whole cores when milli-cores absent",
			tmpl:     godo.KubernetesNodeTemplate{Capacity: res(4, 0, "8Gi", 0), Allocatable: res(3, 0, "7Gi", 0)},
			cpuAlloc: 3000, cpuCap: 4000, memAlloc: "7Gi", pods: 110,
			labels: map[string]string{"node.kubernetes.io/instance-type": "s-2vcpu-4gb"},
		},
		{
			name:     "allocatable defaults to capacity",
			tmpl:     godo.KubernetesNodeTemplate{Capacity: res(2, 2000, "4096Mi", 50)},
			cpuAlloc: 2000, cpuCap: 2000, memAlloc: "4096Mi", pods: 50,
		},
		{
			name: "pool labels win over template labels; system labels win over both",
			tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 2000, "4Gi", 110),
				Labels: map[string]string{"team": "template", "zone": "a", "kubernetes.io/os": "windows"}},
			cpuAlloc: 2000, cpuCap: 2000, memAlloc: "4Gi", pods: 110,
			labels: map[string]string{"team": "pool", "zone": "a", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		},
		{
			name: "taints",
			tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 2000, "4Gi", 110),
				Taints: []string{"dedicated=ml:NoSchedule", "example.com/spot:PreferNoSchedule", " k=v:NoExecute "}},
			cpuAlloc: 2000, cpuCap: 2000, memAlloc: "4Gi", pods: 110,
			taints: []apiv1.Taint{
				{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule},
				{Key: "example.com/spot", Effect: apiv1.TaintEffectPreferNoSchedule},
				{Key: "k", Value: "v", Effect: apiv1.TaintEffectNoExecute},
			},
		},
		{
			name: "nvidia GPU",
			tmpl: godo.KubernetesNodeTemplate{Capacity: res(20, 20000, "240Gi", 110),
				Gpu: &godo.KubernetesNodePoolGPUResources{Vendor: "nvidia", Model: "nvidia_h100", Count: 8}},
			cpuAlloc: 20000, cpuCap: 20000, memAlloc: "240Gi", pods: 110, gpuRes: "nvidia.com/gpu", gpus: 8,
			labels: map[string]string{LabelGPUBrand: "nvidia", LabelGPUModel: "nvidia_h100"},
		},
		{
			name: "AMD GPU",
			tmpl: godo.KubernetesNodeTemplate{Capacity: res(20, 20000, "240Gi", 110),
				Gpu: &godo.KubernetesNodePoolGPUResources{Vendor: "AMD", Model: "amd_mi300x", Count: 1}},
			cpuAlloc: 20000, cpuCap: 20000, memAlloc: "240Gi", pods: 110, gpuRes: "amd.com/gpu", gpus: 1,
			labels: map[string]string{LabelGPUBrand: "amd", LabelGPUModel: "amd_mi300x"},
		},
		{
			name:     "GPU block with zero count is no GPU",
			tmpl:     godo.KubernetesNodeTemplate{Capacity: res(2, 2000, "4Gi", 110), Gpu: &godo.KubernetesNodePoolGPUResources{}},
			cpuAlloc: 2000, cpuCap: 2000, memAlloc: "4Gi", pods: 110,
		},
		{name: "no capacity", tmpl: godo.KubernetesNodeTemplate{}, wantErr: "no capacity"},
		{name: "no cpu", tmpl: godo.KubernetesNodeTemplate{Capacity: res(0, 0, "4Gi", 110)}, wantErr: "capacity has no cpu"},
		{name: "no memory", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "", 110)}, wantErr: "capacity has no memory"},
		{name: "bad memory", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4 gigs", 110)}, wantErr: `memory "4 gigs" is not a quantity`},
		{name: "negative memory", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "-1Gi", 110)}, wantErr: "not positive"},
		{name: "bad allocatable", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", 110), Allocatable: res(1, 0, "x", 1)}, wantErr: "allocatable memory"},
		{name: "negative pods", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", -1)}, wantErr: "pods -1 is negative"},
		{name: "taint without effect", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", 1), Taints: []string{"k=v"}}, wantErr: `taint "k=v": want key=value:Effect`},
		{name: "taint bad effect", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", 1), Taints: []string{"k=v:Sometimes"}}, wantErr: `effect "Sometimes"`},
		{name: "taint empty key", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", 1), Taints: []string{"=v:NoSchedule"}}, wantErr: "key \"\" is invalid"},
		{name: "taint bad key", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", 1), Taints: []string{"bad key=v:NoSchedule"}}, wantErr: `key "bad key" is invalid`},
		{name: "taint bad value", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", 1), Taints: []string{"k=a b:NoSchedule"}}, wantErr: `value "a b" is invalid`},
		{name: "taint only effect", tmpl: godo.KubernetesNodeTemplate{Capacity: res(2, 0, "4Gi", 1), Taints: []string{":NoSchedule"}}, wantErr: "want key=value:Effect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl := c.tmpl
			n, err := buildTemplateNode(pool, &tmpl, DefaultGPULabel, "")
			if endsWithError(t, err, c.wantErr) {
				return
			}
			if n.Status.Allocatable.Cpu().MilliValue() != c.cpuAlloc || n.Status.Capacity.Cpu().MilliValue() != c.cpuCap {
				t.Errorf("cpu allocatable %s capacity %s", n.Status.Allocatable.Cpu(), n.Status.Capacity.Cpu())
			}
			if want := resource.MustParse(c.memAlloc); n.Status.Allocatable.Memory().Cmp(want) != 0 {
				t.Errorf("memory allocatable %s, want %s", n.Status.Allocatable.Memory(), c.memAlloc)
			}
			if n.Status.Allocatable.Pods().Value() != c.pods {
				t.Errorf("pods %s, want %d", n.Status.Allocatable.Pods(), c.pods)
			}
			for _, r := range []apiv1.ResourceName{gpu.ResourceNvidiaGPU, gpu.ResourceAMDGPU} {
				q, ok := n.Status.Allocatable[r]
				want := int64(0)
				if r == c.gpuRes {
					want = c.gpus
				}
				if (ok && q.Value() != want) || (!ok && want != 0) {
					t.Errorf("%s = %v, want %d", r, q.String(), want)
				}
			}
			if len(n.Spec.Taints) != len(c.taints) {
				t.Errorf("taints %v, want %v", n.Spec.Taints, c.taints)
			}
			for i := range c.taints {
				if i < len(n.Spec.Taints) && n.Spec.Taints[i] != c.taints[i] {
					t.Errorf("taint %d: %v, want %v", i, n.Spec.Taints[i], c.taints[i])
				}
			}
			for k, v := range c.labels {
				if n.Labels[k] != v {
					t.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
				}
			}
			if !strings.HasPrefix(n.Name, "workers-template-") || n.Labels["kubernetes.io/hostname"] != n.Name {
				t.Errorf("name %q hostname %q", n.Name, n.Labels["kubernetes.io/hostname"])
			}
			ready := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == apiv1.NodeReady && cond.Status == apiv1.ConditionTrue {
					ready = true
				}
			}
			if !ready || n.Spec.ProviderID != "" {
				t.Errorf("ready %v providerID %q", ready, n.Spec.ProviderID)
			}
		})
	}
}

func TestTemplateNamesAreUnique(t *testing.T) {
	pool := &godo.KubernetesNodePool{ID: "p", Name: "w"}
	tmpl := &godo.KubernetesNodeTemplate{Capacity: res(1, 1000, "1Gi", 110)}
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		n, err := buildTemplateNode(pool, tmpl, DefaultGPULabel, "")
		if err != nil {
			t.Fatal(err)
		}
		seen[n.Name] = true
	}
	if len(seen) < 45 {
		t.Errorf("only %d distinct names in 50 templates", len(seen))
	}
}

func TestGetNodeGpuConfig(t *testing.T) {
	p := &CloudProvider{gpuLabel: DefaultGPULabel}
	node := func(labels map[string]string, capacity apiv1.ResourceList) *apiv1.Node {
		return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}, Status: apiv1.NodeStatus{Capacity: capacity}}
	}
	one := resource.MustParse("1")
	cases := []struct {
		name  string
		node  *apiv1.Node
		label string
		typ   string
		res   apiv1.ResourceName
	}{
		{"cpu node", node(map[string]string{"team": "a"}, apiv1.ResourceList{apiv1.ResourceCPU: one}), "", "", ""},
		{"gpu-brand nvidia", node(map[string]string{LabelGPUBrand: "nvidia"}, nil), LabelGPUBrand, "nvidia", gpu.ResourceNvidiaGPU},
		{"gpu-brand amd", node(map[string]string{LabelGPUBrand: "amd"}, nil), LabelGPUBrand, "amd", gpu.ResourceAMDGPU},
		{"upstream label", node(map[string]string{LabelGPUNodeUpstream: "true"}, nil), LabelGPUNodeUpstream, "true", gpu.ResourceNvidiaGPU},
		{"resource only", node(nil, apiv1.ResourceList{gpu.ResourceAMDGPU: one}), DefaultGPULabel, "amd", gpu.ResourceAMDGPU},
		{"resource beats brand", node(map[string]string{LabelGPUBrand: "nvidia"}, apiv1.ResourceList{gpu.ResourceAMDGPU: one}), LabelGPUBrand, "nvidia", gpu.ResourceAMDGPU},
	}
	for _, c := range cases {
		got := p.GetNodeGpuConfig(c.node)
		if c.label == "" {
			if got != nil {
				t.Errorf("%s: %+v, want nil", c.name, got)
			}
			continue
		}
		if got == nil || got.Label != c.label || got.Type != c.typ || got.ExtendedResourceName != c.res {
			t.Errorf("%s: %+v, want %s=%s %s", c.name, got, c.label, c.typ, c.res)
		}
	}
}

func TestGPULabelDefault(t *testing.T) {
	cfg, err := parseConfig([]byte(`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t"}`))
	if err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	opts.GPULabel = ""
	p, err := newCloudProvider(cfg, opts, nil, defaultClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	if p.GPULabel() != "doks.digitalocean.com/gpu-brand" {
		t.Errorf("default GPU label %q", p.GPULabel())
	}
	if rl, _ := p.GetResourceLimiter(); rl == nil {
		t.Error("nil resource limiter")
	}
}
