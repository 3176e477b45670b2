package scaleup

import (
	"maps"
	"math"
	"slices"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/config"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Labels that differ between otherwise identical groups: node identity,
// zone/region, and DOKS pool identity.
var ignoredLabels = map[string]bool{
	apiv1.LabelHostname:                                       true,
	apiv1.LabelTopologyZone:                                   true,
	apiv1.LabelTopologyRegion:                                 true,
	apiv1.LabelFailureDomainBetaZone:                          true,
	apiv1.LabelFailureDomainBetaRegion:                        true,
	"doks.digitalocean.com/node-id":                           true,
	"doks.digitalocean.com/node-pool-id":                      true,
	"doks.digitalocean.com/node-pool":                         true,
	"doks.digitalocean.com/managed":                           true,
	"doks.digitalocean.com/version":                           true,
	"node.kubernetes.io/exclude-from-external-load-balancers": true,
}

// Similarity decides which node groups are similar for
// --balance-similar-node-groups, as upstream's comparators do.
type Similarity struct {
	// labels (--balancing-label), when set, are all that is compared:
	// each must be on both templates with the same value.
	labels []string
	// ignored are the labels left out of the default comparison: the
	// built-in ones plus --balancing-ignore-label.
	ignored map[string]bool
	// Tolerances (--memory-difference-ratio, --max-allocatable-difference-
	// ratio, --max-free-difference-ratio): memory capacity may differ a
	// little between otherwise identical machines, allocatable and free a
	// little more (system reservations, DaemonSets).
	memoryRatio, allocatableRatio, freeRatio float64
}

// NewSimilarity builds the comparison the options ask for.
func NewSimilarity(opts config.AutoscalingOptions) Similarity {
	s := Similarity{
		labels:      slices.Clone(opts.BalancingLabels),
		ignored:     maps.Clone(ignoredLabels),
		memoryRatio: opts.MaxCapacityMemoryDifferenceRatio, allocatableRatio: opts.MaxAllocatableDifferenceRatio, freeRatio: opts.MaxFreeDifferenceRatio,
	}
	for _, l := range opts.BalancingExtraIgnoredLabels {
		s.ignored[l] = true
	}
	if len(s.labels) > 0 && len(opts.BalancingExtraIgnoredLabels) > 0 {
		klog.InfoS("Node groups are compared by --balancing-label only: --balancing-ignore-label has no effect, as upstream", "balancingLabels", s.labels, "balancingIgnoreLabels", opts.BalancingExtraIgnoredLabels)
	}
	return s
}

// Similar is NewSimilarity's comparison at upstream's default flags.
func Similar(a, b *framework.NodeInfo) bool { return NewSimilarity(config.Defaults()).Similar(a, b) }

// Similar reports whether new nodes of the two templates are
// interchangeable for pods. With --balancing-label: the labels named have
// the same values on both, and nothing else is compared. Otherwise: same
// cpu and other capacities, memory, allocatable and free resources within
// the tolerances, the same labels apart from the ignored ones, and the same
// taints.
func (s Similarity) Similar(a, b *framework.NodeInfo) bool {
	if a == nil || b == nil || a.Node() == nil || b.Node() == nil {
		return false
	}
	na, nb := a.Node(), b.Node()
	if len(s.labels) > 0 {
		return sameLabelValues(na.Labels, nb.Labels, s.labels)
	}
	if !capacitiesSimilar(na.Status.Capacity, nb.Status.Capacity, s.memoryRatio) {
		return false
	}
	if !within(na.Status.Allocatable, nb.Status.Allocatable, s.allocatableRatio) {
		return false
	}
	if !within(free(a), free(b), s.freeRatio) {
		return false
	}
	if !labelsSimilar(na.Labels, nb.Labels, s.ignored) {
		return false
	}
	return taintsEqual(na.Spec.Taints, nb.Spec.Taints)
}

// sameLabelValues reports whether every one of labels is on both with the
// same value.
func sameLabelValues(a, b map[string]string, labels []string) bool {
	for _, l := range labels {
		va, okA := a[l]
		vb, okB := b[l]
		if !okA || !okB || va != vb {
			return false
		}
	}
	return true
}

func capacitiesSimilar(a, b apiv1.ResourceList, memoryRatio float64) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok {
			return false
		}
		if name == apiv1.ResourceMemory {
			if !closeEnough(qa, qb, memoryRatio) {
				return false
			}
			continue
		}
		if qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

func within(a, b apiv1.ResourceList, ratio float64) bool {
	for _, name := range []apiv1.ResourceName{apiv1.ResourceCPU, apiv1.ResourceMemory} {
		if !closeEnough(a[name], b[name], ratio) {
			return false
		}
	}
	return true
}

func closeEnough(a, b resource.Quantity, ratio float64) bool {
	fa, fb := float64(a.MilliValue()), float64(b.MilliValue())
	larger := math.Max(fa, fb)
	if larger == 0 {
		return true
	}
	return math.Abs(fa-fb)/larger <= ratio
}

// free returns allocatable minus what the template's DaemonSet pods request.
func free(ni *framework.NodeInfo) apiv1.ResourceList {
	alloc := ni.Node().Status.Allocatable
	var cpu, mem int64
	for _, p := range ni.Pods() {
		req := framework.PodRequests(p)
		cpu += req.Cpu().MilliValue()
		mem += req.Memory().Value()
	}
	return apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewMilliQuantity(alloc.Cpu().MilliValue()-cpu, resource.DecimalSI),
		apiv1.ResourceMemory: *resource.NewQuantity(alloc.Memory().Value()-mem, resource.BinarySI),
	}
}

func labelsSimilar(a, b map[string]string, ignored map[string]bool) bool {
	for k, v := range a {
		if ignored[k] {
			continue
		}
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	for k := range b {
		if ignored[k] {
			continue
		}
		if _, ok := a[k]; !ok {
			return false
		}
	}
	return true
}

func taintsEqual(a, b []apiv1.Taint) bool {
	key := func(ts []apiv1.Taint) []string {
		var out []string
		for _, t := range ts {
			if transientTaints[t.Key] {
				continue
			}
			out = append(out, t.Key+"="+t.Value+":"+string(t.Effect))
		}
		sort.Strings(out)
		return out
	}
	ka, kb := key(a), key(b)
	if len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}
