package digitalocean

import (
	"crypto/rand"
	"fmt"
	"maps"
	"strings"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
)

// GPU labels. DOKS GPU nodes carry the brand and model labels; upstream's
// provider named the gpu-node label, which is accepted too.
const (
	LabelGPUBrand        = "doks.digitalocean.com/gpu-brand"
	LabelGPUModel        = "doks.digitalocean.com/gpu-model"
	LabelGPUNodeUpstream = "cloud.digitalocean.com/gpu-node"
	// DefaultGPULabel is GPULabel() when --gpu-label is empty.
	DefaultGPULabel = LabelGPUBrand
)

// defaultPods is the kubelet's default, used when a template omits pods.
const defaultPods = 110

// Bounds past which a template value is taken as broken rather than as a
// node: DigitalOcean's largest sizes have a few hundred vCPUs, a few TiB of
// memory and 8 GPUs, and the kubelet runs a few hundred pods at most.
const (
	maxTemplateMilliCPU = 10_000 * 1000   // 10,000 cores
	maxTemplateMemory   = int64(64) << 40 // 64 TiB
	maxTemplatePods     = 10_000
	maxTemplateGPUs     = 1024
)

// gpuResourceForVendor returns the extended resource of a GPU vendor.
func gpuResourceForVendor(vendor string) apiv1.ResourceName {
	if strings.Contains(strings.ToLower(vendor), "amd") {
		return gpu.ResourceAMDGPU
	}
	return gpu.ResourceNvidiaGPU
}

// resourceList converts a template's resources. CPU comes from
// cpu_milli_cores when present: whole cores (the deprecated cpu field)
// overstate what small nodes can run.
func resourceList(r *godo.KubernetesNodePoolResources, what string) (apiv1.ResourceList, error) {
	milli := r.CpuMilliCores
	if milli == 0 {
		milli = r.CPU * 1000
	}
	if milli <= 0 {
		return nil, fmt.Errorf("template %s has no cpu", what)
	}
	if milli > maxTemplateMilliCPU || r.CPU > maxTemplateMilliCPU/1000 {
		return nil, fmt.Errorf("template %s.cpu_milli_cores %d is not a plausible node size (over %d cores)", what, milli, maxTemplateMilliCPU/1000)
	}
	if strings.TrimSpace(r.Memory) == "" {
		return nil, fmt.Errorf("template %s has no memory", what)
	}
	mem, err := resource.ParseQuantity(strings.TrimSpace(r.Memory))
	if err != nil {
		return nil, fmt.Errorf("template %s memory %q is not a quantity: %v", what, r.Memory, err)
	}
	if mem.Sign() <= 0 {
		return nil, fmt.Errorf("template %s memory %q is not positive", what, r.Memory)
	}
	if mem.Cmp(*resource.NewQuantity(maxTemplateMemory, resource.BinarySI)) > 0 {
		return nil, fmt.Errorf("template %s.memory %q is not a plausible node size (over 64Ti)", what, truncateText(r.Memory, 32))
	}
	pods := r.Pods
	if pods < 0 {
		return nil, fmt.Errorf("template %s pods %d is negative", what, pods)
	}
	if pods > maxTemplatePods {
		return nil, fmt.Errorf("template %s.pods %d is not plausible (over %d)", what, pods, maxTemplatePods)
	}
	if pods == 0 {
		pods = defaultPods
	}
	return apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewMilliQuantity(milli, resource.DecimalSI),
		apiv1.ResourceMemory: mem,
		apiv1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}, nil
}

// parseTaint parses DOKS's "key=value:Effect" (or "key:Effect").
func parseTaint(s string) (apiv1.Taint, error) {
	spec := strings.TrimSpace(s)
	i := strings.LastIndex(spec, ":")
	if i <= 0 {
		return apiv1.Taint{}, fmt.Errorf("taint %q: want key=value:Effect", s)
	}
	kv, effect := spec[:i], apiv1.TaintEffect(spec[i+1:])
	switch effect {
	case apiv1.TaintEffectNoSchedule, apiv1.TaintEffectPreferNoSchedule, apiv1.TaintEffectNoExecute:
	default:
		return apiv1.Taint{}, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	key, value, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return apiv1.Taint{}, fmt.Errorf("taint %q: key %q is invalid: %s", s, key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return apiv1.Taint{}, fmt.Errorf("taint %q: value %q is invalid: %s", s, value, strings.Join(errs, "; "))
	}
	return apiv1.Taint{Key: key, Value: value, Effect: effect}, nil
}

// checkLabels refuses labels Kubernetes would not accept on a Node.
func checkLabels(field string, labels map[string]string) error {
	for k, v := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%s: key %q is not a valid label key: %s", field, truncateText(k, 64), strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("%s[%s]: value %q is not a valid label value: %s", field, k, truncateText(v, 64), strings.Join(errs, "; "))
		}
	}
	return nil
}

func randomSuffix(n int) string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}

// buildTemplateNode builds a Ready Node like the ones the pool would get.
// ProviderID stays empty: the node does not exist. region, when known, is
// set in the region labels DOKS nodes carry, so that pods selecting or
// spreading by region can scale a pool up.
func buildTemplateNode(pool *godo.KubernetesNodePool, t *godo.KubernetesNodeTemplate, gpuLabel, region string) (*apiv1.Node, error) {
	if t.Capacity == nil {
		return nil, fmt.Errorf("template has no capacity")
	}
	capacity, err := resourceList(t.Capacity, "capacity")
	if err != nil {
		return nil, err
	}
	allocatable := capacity.DeepCopy()
	if t.Allocatable != nil {
		if allocatable, err = resourceList(t.Allocatable, "allocatable"); err != nil {
			return nil, err
		}
		for _, name := range []apiv1.ResourceName{apiv1.ResourceCPU, apiv1.ResourceMemory, apiv1.ResourcePods} {
			a, c := allocatable[name], capacity[name]
			if a.Cmp(c) > 0 {
				return nil, fmt.Errorf("template allocatable.%s %s is above capacity.%s %s", name, a.String(), name, c.String())
			}
		}
	}
	if t.Gpu != nil {
		if t.Gpu.Count < 0 {
			return nil, fmt.Errorf("template gpu.count %d is negative", t.Gpu.Count)
		}
		if t.Gpu.Count > maxTemplateGPUs {
			return nil, fmt.Errorf("template gpu.count %d is not plausible (over %d)", t.Gpu.Count, maxTemplateGPUs)
		}
	}
	if err := checkLabels("template labels", t.Labels); err != nil {
		return nil, err
	}
	if err := checkLabels("node pool labels", pool.Labels); err != nil {
		return nil, err
	}
	var taints []apiv1.Taint
	for _, s := range t.Taints {
		taint, err := parseTaint(s)
		if err != nil {
			return nil, err
		}
		taints = append(taints, taint)
	}

	slug := t.Slug
	if slug == "" {
		slug = pool.Size
	}
	name := fmt.Sprintf("%s-template-%s", pool.Name, randomSuffix(6))
	labels := map[string]string{}
	maps.Copy(labels, t.Labels)
	maps.Copy(labels, pool.Labels)
	maps.Copy(labels, map[string]string{
		apiv1.LabelOSStable:           "linux",
		apiv1.LabelArchStable:         "amd64",
		apiv1.LabelHostname:           name,
		apiv1.LabelInstanceTypeStable: slug,
		LabelNodePool:                 pool.Name,
		LabelNodePoolID:               pool.ID,
	})
	if region != "" {
		labels[apiv1.LabelTopologyRegion] = region
		labels[apiv1.LabelFailureDomainBetaRegion] = region
	}
	if g := t.Gpu; g != nil && g.Count > 0 {
		res := gpuResourceForVendor(g.Vendor)
		capacity[res] = *resource.NewQuantity(g.Count, resource.DecimalSI)
		allocatable[res] = *resource.NewQuantity(g.Count, resource.DecimalSI)
		brand := strings.ToLower(g.Vendor)
		if brand == "" {
			brand = "nvidia"
		}
		labels[LabelGPUBrand] = brand
		if g.Model != "" {
			labels[LabelGPUModel] = g.Model
		}
		if gpuLabel != "" && labels[gpuLabel] == "" {
			labels[gpuLabel] = brand
		}
	}

	if err := checkLabels("template gpu labels (gpu.vendor, gpu.model)", labels); err != nil {
		return nil, err
	}

	now := metav1.Now()
	cond := func(t apiv1.NodeConditionType, s apiv1.ConditionStatus, reason string) apiv1.NodeCondition {
		return apiv1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       apiv1.NodeSpec{Taints: taints},
		Status: apiv1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       apiv1.NodeRunning,
			Conditions: []apiv1.NodeCondition{
				cond(apiv1.NodeReady, apiv1.ConditionTrue, "KubeletReady"),
				cond(apiv1.NodeMemoryPressure, apiv1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(apiv1.NodeDiskPressure, apiv1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(apiv1.NodePIDPressure, apiv1.ConditionFalse, "KubeletHasSufficientPID"),
				cond(apiv1.NodeNetworkUnavailable, apiv1.ConditionFalse, "RouteCreated"),
			},
		},
	}, nil
}
