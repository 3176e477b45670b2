package scaleup

import (
	"math"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Tolerances for --balance-similar-node-groups (upstream's values): memory
// capacity may differ a little between otherwise identical machines, and
// allocatable/free a little more (system reservations, DaemonSets).
const (
	maxCapacityMemoryDifference = 0.015
	maxAllocatableDifference    = 0.05
	maxFreeDifference           = 0.05
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

// Similar reports whether new nodes of the two templates are
// interchangeable for pods: same cpu and other capacities, memory within
// 1.5%, allocatable and free resources within 5%, the same labels apart
// from identity/zone/pool labels, and the same taints.
func Similar(a, b *framework.NodeInfo) bool {
	if a == nil || b == nil || a.Node() == nil || b.Node() == nil {
		return false
	}
	na, nb := a.Node(), b.Node()
	if !capacitiesSimilar(na.Status.Capacity, nb.Status.Capacity) {
		return false
	}
	if !within(na.Status.Allocatable, nb.Status.Allocatable, maxAllocatableDifference) {
		return false
	}
	if !within(free(a), free(b), maxFreeDifference) {
		return false
	}
	if !labelsSimilar(na.Labels, nb.Labels) {
		return false
	}
	return taintsEqual(na.Spec.Taints, nb.Spec.Taints)
}

func capacitiesSimilar(a, b apiv1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok {
			return false
		}
		if name == apiv1.ResourceMemory {
			if !closeEnough(qa, qb, maxCapacityMemoryDifference) {
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

// free: allocatable minus what the template's DaemonSet pods request.
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

func labelsSimilar(a, b map[string]string) bool {
	for k, v := range a {
		if ignoredLabels[k] {
			continue
		}
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	for k := range b {
		if ignoredLabels[k] {
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
