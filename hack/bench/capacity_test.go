package main

import (
	"math"
	"testing"
	"time"

	"github.com/digitalocean/godo"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func TestMostWithin(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name  string
		times []time.Duration
		want  int
	}{
		{"none", nil, 0},
		{"one", []time.Duration{0}, 1},
		{"a TTL apart: never two in one TTL", []time.Duration{0, 30 * s, 60 * s}, 1},
		{"just under a TTL apart", []time.Duration{0, 29 * s, 60 * s}, 2},
		{"a burst", []time.Duration{0, s, 2 * s, 40 * s}, 3},
		{"the later ones closest", []time.Duration{0, 31 * s, 35 * s, 36 * s}, 3},
	} {
		if got := mostWithin(tc.times, 30*s); got != tc.want {
			t.Errorf("%s: mostWithin = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSizeRequested(t *testing.T) {
	pools := []godo.KubernetesNodePool{
		{Name: "gpu-second", Size: capSecondGPU, Count: 0},
		{Name: "gpu-first", Size: capFirstGPU, Count: 1},
	}
	if sizeRequested(pools, capSecondGPU, nil) {
		t.Error("a pool of the size at count 0 counted as a request")
	}
	if !sizeRequested(pools, capFirstGPU, nil) {
		t.Error("a new pool of the size at count 1 not counted")
	}
	// A fixed pool at its count before: no request; one node more: a request.
	before := poolCounts(pools)
	if sizeRequested(pools, capFirstGPU, before) {
		t.Error("a pool at its earlier count counted as a request")
	}
	pools[1].Count = 2
	if !sizeRequested(pools, capFirstGPU, before) {
		t.Error("a pool resized from 1 to 2 not counted")
	}
	if sizeRequested(nil, capFirstGPU, nil) {
		t.Error("no pools, a request")
	}
}

func TestNodesAsked(t *testing.T) {
	last := map[string]int{"fixed": 1}
	pools := []godo.KubernetesNodePool{{Name: "fixed", Size: capFirstGPU, Count: 2}}
	if n := nodesAsked(last, pools, capFirstGPU); n != 1 {
		t.Errorf("1 → 2: %d nodes asked, want 1", n)
	}
	// The same count again asks nothing; a shrink asks nothing and is remembered.
	if n := nodesAsked(last, pools, capFirstGPU); n != 0 {
		t.Errorf("2 → 2: %d nodes asked, want 0", n)
	}
	pools[0].Count = 1
	_ = nodesAsked(last, pools, capFirstGPU)
	// A pool created on demand with 2 nodes, and the fixed pool back up to 3.
	pools[0].Count = 3
	pools = append(pools, godo.KubernetesNodePool{Name: "new", Size: capFirstGPU, Count: 2},
		godo.KubernetesNodePool{Name: "other", Size: capSecondGPU, Count: 5})
	if n := nodesAsked(last, pools, capFirstGPU); n != 4 {
		t.Errorf("%d nodes asked, want 4 (2 new, 2 raised; another size not counted)", n)
	}
}

func TestPoolSpend(t *testing.T) {
	price, ok := doks.SizePrice("s-2vcpu-4gb")
	if !ok {
		t.Fatal("no price for s-2vcpu-4gb")
	}
	node := godo.KubernetesNode{Name: "n"}
	pools := []godo.KubernetesNodePool{
		// Target above the nodes listed: the nodes asked for are billed.
		{Size: "s-2vcpu-4gb", Count: 3, Nodes: []*godo.KubernetesNode{&node}},
		// Nodes above the target: a node being removed is billed until gone.
		{Size: "s-2vcpu-4gb", Count: 0, Nodes: []*godo.KubernetesNode{&node, &node}},
	}
	if got, want := poolSpend(pools), 5*price; math.Abs(got-want) > 1e-9 {
		t.Errorf("poolSpend = %v, want %v", got, want)
	}
}

func TestCapacitySetup(t *testing.T) {
	// Upstream gets fixed pools of both GPU sizes and no autoprovisioning section.
	pools, nap, extra := gpuSetup(capacityBuild{upstream: true})
	if nap != nil || extra != nil || len(pools) != 3 || pools[1].Size != capFirstGPU || pools[2].Size != capSecondGPU {
		t.Errorf("upstream setup: %v %v %v", pools, nap, extra)
	}
	// This project: the base pool only, the first size preferred.
	pools, nap, extra = gpuSetup(capacityBuild{})
	pref, _ := nap["size_preference"].([]string)
	if len(pools) != 1 || len(pref) != 2 || pref[0] != capFirstGPU || len(extra) != 1 {
		t.Errorf("this project's setup: %v %v %v", pools, nap, extra)
	}
	// The spending scenario's pods must not all fit under the limit, or it bounds nothing.
	price, _ := doks.SizePrice("s-2vcpu-4gb")
	if fit := int(capSpendCap / price); fit >= capSpendPods {
		t.Errorf("%d nodes fit under $%v/h: the limit binds nothing for %d pods", fit, capSpendCap, capSpendPods)
	}
	if capWindow <= capTTL {
		t.Errorf("window %v not longer than the TTL %v", capWindow, capTTL)
	}
}
