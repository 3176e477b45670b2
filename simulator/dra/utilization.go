package dra

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// PoolUtilization is how much of one pool of a node's devices is allocated.
type PoolUtilization struct {
	Driver, Pool string
	Utilization  float64
}

// HighestUtilization returns the most used of the pools published in
// nodeSlices, counting the devices claims hold (admin access holds none),
// as upstream's scale-down counts a DRA node: a GPU node whose only device
// is allocated is fully used. Per pool (newest generation only; an
// incomplete pool is an error): devices without counters count by number
// allocated; devices that consume shared counters count by the most
// consumed counter of each counter set, averaged over the counter sets;
// a pool with both kinds weighs each by its device count, unless all the
// allocated devices are of one kind (then that kind's figure), as upstream
// computes it. ok is false when the node publishes no devices.
func HighestUtilization(nodeSlices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) (best PoolUtilization, ok bool, err error) {
	if len(nodeSlices) == 0 {
		return PoolUtilization{}, false, nil
	}
	type poolKey struct{ driver, pool string }
	allocated := map[poolKey]map[string]bool{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			k := poolKey{r.Driver, r.Pool}
			if allocated[k] == nil {
				allocated[k] = map[string]bool{}
			}
			allocated[k][r.Device] = true
		}
	}
	pools := map[poolKey][]*resourceapi.ResourceSlice{}
	var order []poolKey
	for _, sl := range nodeSlices {
		k := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		if _, found := pools[k]; !found {
			order = append(order, k)
		}
		pools[k] = append(pools[k], sl)
	}
	first := true
	for _, k := range order {
		current, err := newestGeneration(pools[k])
		if err != nil {
			return PoolUtilization{}, false, fmt.Errorf("driver %s pool %s: %w", k.driver, k.pool, err)
		}
		u := poolUtilization(current, allocated[k])
		if first || u >= best.Utilization {
			best = PoolUtilization{Driver: k.driver, Pool: k.pool, Utilization: u}
			first = false
		}
	}
	return best, true, nil
}

// newestGeneration keeps the slices of the pool's newest generation and
// checks that all of them are there.
func newestGeneration(pool []*resourceapi.ResourceSlice) ([]*resourceapi.ResourceSlice, error) {
	var newest []*resourceapi.ResourceSlice
	gen := int64(-1)
	for _, sl := range pool {
		switch g := sl.Spec.Pool.Generation; {
		case g > gen:
			gen, newest = g, []*resourceapi.ResourceSlice{sl}
		case g == gen:
			newest = append(newest, sl)
		}
	}
	if want := newest[0].Spec.Pool.ResourceSliceCount; int64(len(newest)) != want {
		return nil, fmt.Errorf("generation %d has %d of its %d slices", gen, len(newest), want)
	}
	return newest, nil
}

func poolUtilization(pool []*resourceapi.ResourceSlice, allocated map[string]bool) float64 {
	var atomic, atomicUsed, partitionableUsed int
	var usedParts []resourceapi.Device
	counterSets := map[string]bool{} // counter sets partitionable devices consume
	totals := map[string]map[string]resource.Quantity{}
	for _, sl := range pool {
		for _, cs := range sl.Spec.SharedCounters {
			addCounters(totals, cs.Name, cs.Counters)
		}
		for _, d := range sl.Spec.Devices {
			if len(d.ConsumesCounters) == 0 {
				atomic++
				if allocated[d.Name] {
					atomicUsed++
				}
				continue
			}
			for _, cc := range d.ConsumesCounters {
				counterSets[cc.CounterSet] = true
			}
			if allocated[d.Name] {
				partitionableUsed++
				usedParts = append(usedParts, d)
			}
		}
	}
	atomicUtil := 0.0
	if atomic > 0 {
		atomicUtil = float64(atomicUsed) / float64(atomic)
	}
	if partitionableUsed == 0 {
		return atomicUtil
	}
	partUtil := 0.0
	if len(counterSets) > 0 {
		consumed := map[string]map[string]resource.Quantity{}
		for _, d := range usedParts {
			for _, cc := range d.ConsumesCounters {
				addCounters(consumed, cc.CounterSet, cc.Counters)
			}
		}
		for set, counters := range totals {
			highest := 0.0
			for name, total := range counters {
				if total.IsZero() {
					continue
				}
				if used, found := consumed[set][name]; found {
					highest = max(highest, float64(used.Value())/float64(total.Value()))
				}
			}
			partUtil += highest / float64(len(counterSets))
		}
	}
	if atomicUsed == 0 {
		return partUtil
	}
	parts := float64(len(counterSets))
	all := parts + float64(atomic)
	return partUtil*parts/all + atomicUtil*float64(atomic)/all
}

func addCounters(into map[string]map[string]resource.Quantity, set string, counters map[string]resourceapi.Counter) {
	if into[set] == nil {
		into[set] = map[string]resource.Quantity{}
	}
	for name, c := range counters {
		q := into[set][name]
		q.Add(c.Value)
		into[set][name] = q
	}
}
