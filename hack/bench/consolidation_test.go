package main

import (
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func price(t *testing.T, slug string) float64 {
	t.Helper()
	p, ok := doks.SizePrice(slug)
	if !ok {
		t.Fatalf("no price for %s", slug)
	}
	return p
}

func TestClusterPriceCountsEveryListedNodeButTheSkippedPool(t *testing.T) {
	nodes := func(n int) []*godo.KubernetesNode {
		var out []*godo.KubernetesNode
		for i := 0; i < n; i++ {
			out = append(out, &godo.KubernetesNode{Status: &godo.KubernetesNodeStatus{State: "running"}})
		}
		return out
	}
	draining := nodes(1)
	draining[0].Status.State = "draining"
	pools := []godo.KubernetesNodePool{
		{Name: "base", Size: "s-2vcpu-4gb", Nodes: nodes(1)},
		{Name: "a", Size: "s-8vcpu-16gb", Nodes: nodes(2)},
		{Name: "b", Size: "s-2vcpu-2gb", Nodes: draining}, // billed until gone
		{Name: "c", Size: "s-4vcpu-8gb"},                  // no nodes: nothing
	}
	want := 2*price(t, "s-8vcpu-16gb") + price(t, "s-2vcpu-2gb")
	if got := clusterPrice(pools, "base"); math.Abs(got-want) > 1e-9 {
		t.Errorf("price %v, want %v", got, want)
	}
	if got, want := nodeSummary(pools, "base"), "1 × s-2vcpu-2gb, 2 × s-8vcpu-16gb"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestLowerBoundTakesTheBindingResourceAtItsCheapestSize(t *testing.T) {
	// Allocatable in the catalogue: s-2vcpu-2gb 1900m / 1436Mi, s-8vcpu-16gb 7800m / 14236Mi.
	perCPU := price(t, "s-2vcpu-2gb") / 1.9
	perGiB := price(t, "s-8vcpu-16gb") / (14236.0 / 1024)
	gib := int64(1 << 30)
	for _, tc := range []struct {
		name      string
		milli     int64
		mem       int64
		want      float64
		wantBinds string
	}{
		{name: "CPU-heavy pods: the cheapest vCPU binds", milli: 19000, mem: 1 * gib, want: 19 * perCPU, wantBinds: "vCPU"},
		{name: "memory-heavy pods: the cheapest GiB binds", milli: 1000, mem: 20 * gib, want: 20 * perGiB, wantBinds: "memory"},
		{name: "nothing left", want: 0, wantBinds: "vCPU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, binds := lowerBound(tc.milli, tc.mem, consolidationSizes)
			if math.Abs(got-tc.want) > 1e-9 || binds != tc.wantBinds {
				t.Errorf("bound %v (%s), want %v (%s)", got, binds, tc.want, tc.wantBinds)
			}
		})
	}
	// Only allowed sizes count: without s-2vcpu-2gb the cheapest vCPU is dearer.
	without, _ := lowerBound(19000, gib, []string{"s-4vcpu-8gb", "s-8vcpu-16gb"})
	if with, _ := lowerBound(19000, gib, consolidationSizes); without <= with {
		t.Errorf("bound without the cheapest vCPU size %v, want above %v", without, with)
	}
}

func TestPodRequestsLeaveOutPodsThatAreGoing(t *testing.T) {
	pod := func(cpu, mem string, mod func(*apiv1.Pod)) apiv1.Pod {
		p := apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(mem)}}}}}}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	cpu, mem := podRequests([]apiv1.Pod{
		pod("250m", "256Mi", nil),
		pod("1500m", "512Mi", nil),
		pod("4", "8Gi", func(p *apiv1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }),
		pod("4", "8Gi", func(p *apiv1.Pod) { p.Status.Phase = apiv1.PodSucceeded }),
	})
	if cpu != 1750 || mem != 768<<20 {
		t.Errorf("requests %dm, %d bytes; want 1750m, %d", cpu, mem, 768<<20)
	}
}

func TestTallyEvictions(t *testing.T) {
	shrunk := time.Date(2026, 1, 1, 12, 0, 30, 500e6, time.UTC)
	before, sameSecond, after := shrunk.Add(-time.Hour), shrunk.Truncate(time.Second), shrunk.Add(time.Minute)
	pod := func(created time.Time, terminating bool) apiv1.Pod {
		p := apiv1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Time{Time: created}}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: after}
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		evicted map[string]time.Time
		end     []apiv1.Pod
		want    evictionTally
	}{
		{name: "nothing moved", end: []apiv1.Pod{pod(before, false)}},
		{name: "two pods moved once each",
			evicted: map[string]time.Time{"a": before, "b": sameSecond},
			end:     []apiv1.Pod{pod(before, false), pod(after, false), pod(after, false)},
			want:    evictionTally{evicted: 2, moved: 2}},
		{name: "a replacement evicted again",
			evicted: map[string]time.Time{"a": before, "a2": after},
			end:     []apiv1.Pod{pod(after, false)},
			want:    evictionTally{evicted: 2, moved: 1, twice: 1}},
		{name: "a terminating pod at the end is not a move",
			evicted: map[string]time.Time{"a": before},
			end:     []apiv1.Pod{pod(after, true), pod(after, false)},
			want:    evictionTally{evicted: 1, moved: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tallyEvictions(tc.evicted, shrunk, tc.end); got != tc.want {
				t.Errorf("tally %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPDBTrackerCountsEachRunOverTheBudgetOnce(t *testing.T) {
	var tr pdbTracker
	for _, down := range []int{0, 1, 2, 2, 1, 0, 3} { // maxUnavailable 1: two runs above it
		tr.observe("small", down, 1)
	}
	tr.observe("cpu", 1, 1) // at the budget, not over
	if tr.violations != 2 {
		t.Errorf("violations %d, want 2", tr.violations)
	}
}

func TestEvictedByAPI(t *testing.T) {
	cond := func(typ apiv1.PodConditionType, status apiv1.ConditionStatus, reason string) *apiv1.Pod {
		return &apiv1.Pod{Status: apiv1.PodStatus{Conditions: []apiv1.PodCondition{{Type: typ, Status: status, Reason: reason}}}}
	}
	if !evictedByAPI(cond(apiv1.DisruptionTarget, apiv1.ConditionTrue, "EvictionByEvictionAPI")) {
		t.Error("an evicted pod not counted")
	}
	for _, p := range []*apiv1.Pod{
		cond(apiv1.DisruptionTarget, apiv1.ConditionTrue, "DeletionByTaintManager"),
		cond(apiv1.DisruptionTarget, apiv1.ConditionFalse, "EvictionByEvictionAPI"),
		cond(apiv1.PodReady, apiv1.ConditionTrue, ""),
	} {
		if evictedByAPI(p) {
			t.Errorf("pod with %+v counted as evicted", p.Status.Conditions)
		}
	}
}

func TestChooseKeepersSpreadsTheThirdOverTheNodes(t *testing.T) {
	pod := func(name, app, node string) apiv1.Pod {
		return apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}}, Spec: apiv1.PodSpec{NodeName: node}}
	}
	pods := []apiv1.Pod{
		pod("s1", "small", "n1"), pod("s2", "small", "n1"), pod("s3", "small", "n1"),
		pod("s4", "small", "n2"), pod("c1", "cpu", "n2"),
		pod("m1", "mem", "n3"), pod("m2", "mem", "n4"), pod("s5", "small", "n4"),
		pod("s6", "small", "n5"),
	}
	keep := chooseKeepers(pods, map[string]int{"small": 2, "cpu": 1, "mem": 1})
	got := slices.Sorted(maps.Keys(keep))
	// Round 1: n1 s1, n2 c1 (first by name), n3 m1, n4 s5 (mem is met), n5: small is met.
	if want := []string{"c1", "m1", "s1", "s5"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	// More quota than pods: every pod stays, nothing loops.
	if keep := chooseKeepers(pods[:2], map[string]int{"small": 5}); len(keep) != 2 {
		t.Errorf("kept %d of 2", len(keep))
	}
}

func TestClusterSignatureChangesWithNodesStatesAndPlacement(t *testing.T) {
	pools := func(state string) []godo.KubernetesNodePool {
		return []godo.KubernetesNodePool{{Name: "p", Nodes: []*godo.KubernetesNode{{Name: "n1", Status: &godo.KubernetesNodeStatus{State: state}}}}}
	}
	pod := func(node string) []apiv1.Pod {
		return []apiv1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "u"}, Spec: apiv1.PodSpec{NodeName: node}}}
	}
	base := clusterSignature(pools("running"), pod("n1"))
	if base != clusterSignature(pools("running"), pod("n1")) {
		t.Error("the same cluster gave two signatures")
	}
	if base == clusterSignature(pools("draining"), pod("n1")) {
		t.Error("a node's state change left the signature")
	}
	if base == clusterSignature(pools("running"), pod("n2")) {
		t.Error("a pod's move left the signature")
	}
}
