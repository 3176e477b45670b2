package dra

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// Kinds of Mismatch, as upstream's dra_node_template_resources_mismatch
// labels them.
const (
	MismatchMissing = "Missing"  // the template has a pool the node does not publish
	MismatchExtra   = "Extra"    // the node publishes a pool the template lacks
	MismatchDiffers = "Mismatch" // a pool of both, with other devices
)

// Mismatch is one pool where a template's slices and a real node's differ.
type Mismatch struct {
	Driver string
	Kind   string
	Detail string
}

// poolShape is what the comparison looks at in a pool: how many devices,
// and the attribute names each device has (values differ from node to
// node: serial numbers, UUIDs).
type poolShape struct {
	pool    string
	devices int
	attrs   string
}

// CompareDevices compares the devices a template predicts with those a
// ready node of its group publishes, pool by pool per driver: pools equal
// in device count and attribute names match whatever their names (pool
// names are per node). A driver whose node pools are incomplete (the
// driver is still publishing) is not compared. The result is sorted.
func CompareDevices(template, node []*resourceapi.ResourceSlice) []Mismatch {
	inFlux := map[string]bool{}
	for _, sl := range node {
		if int64(countPool(node, sl)) != sl.Spec.Pool.ResourceSliceCount {
			inFlux[sl.Spec.Driver] = true
		}
	}
	tShapes, nShapes := shapes(template), shapes(node)
	var out []Mismatch
	drivers := slices.Sorted(maps.Keys(merge(tShapes, nShapes)))
	for _, d := range drivers {
		if inFlux[d] {
			continue
		}
		t, n := slices.Clone(tShapes[d]), slices.Clone(nShapes[d])
		// Exact matches first.
		for i := len(t) - 1; i >= 0; i-- {
			if j := slices.IndexFunc(n, func(s poolShape) bool { return s.devices == t[i].devices && s.attrs == t[i].attrs }); j >= 0 {
				t = slices.Delete(t, i, i+1)
				n = slices.Delete(n, j, j+1)
			}
		}
		for len(t) > 0 && len(n) > 0 {
			out = append(out, Mismatch{Driver: d, Kind: MismatchDiffers,
				Detail: fmt.Sprintf("template pool %s has %d device(s) with attributes [%s], node pool %s has %d with [%s]",
					t[0].pool, t[0].devices, t[0].attrs, n[0].pool, n[0].devices, n[0].attrs)})
			t, n = t[1:], n[1:]
		}
		for _, s := range t {
			out = append(out, Mismatch{Driver: d, Kind: MismatchMissing, Detail: fmt.Sprintf("template pool %s (%d device(s)) is not on the node", s.pool, s.devices)})
		}
		for _, s := range n {
			out = append(out, Mismatch{Driver: d, Kind: MismatchExtra, Detail: fmt.Sprintf("node pool %s (%d device(s)) is not in the template", s.pool, s.devices)})
		}
	}
	return out
}

func countPool(all []*resourceapi.ResourceSlice, of *resourceapi.ResourceSlice) int {
	n := 0
	for _, sl := range all {
		if sl.Spec.Driver == of.Spec.Driver && sl.Spec.Pool.Name == of.Spec.Pool.Name && sl.Spec.Pool.Generation == of.Spec.Pool.Generation {
			n++
		}
	}
	return n
}

// shapes groups slices by driver, then pool, in a stable order.
func shapes(all []*resourceapi.ResourceSlice) map[string][]poolShape {
	type key struct{ driver, pool string }
	devices := map[key]int{}
	attrs := map[key]map[string]bool{}
	var order []key
	for _, sl := range all {
		k := key{sl.Spec.Driver, sl.Spec.Pool.Name}
		if _, found := attrs[k]; !found {
			attrs[k] = map[string]bool{}
			order = append(order, k)
		}
		for _, d := range sl.Spec.Devices {
			devices[k]++
			for a := range d.Attributes {
				attrs[k][string(a)] = true
			}
		}
	}
	out := map[string][]poolShape{}
	for _, k := range order {
		names := slices.Sorted(maps.Keys(attrs[k]))
		out[k.driver] = append(out[k.driver], poolShape{pool: k.pool, devices: devices[k], attrs: strings.Join(names, ",")})
	}
	return out
}

func merge(a, b map[string][]poolShape) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
