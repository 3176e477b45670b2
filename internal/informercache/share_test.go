package informercache

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// same tells whether two maps are one (not merely equal).
func same(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Replicas decoded one by one share their labels and resource lists; a pod
// with other requests or labels keeps its own; a StatefulSet's pods, whose
// labels name them, keep theirs.
func TestCacheSharesEqualMapsOfPods(t *testing.T) {
	c := New()
	pod := func(name, owner, kind, cpu string) *apiv1.Pod {
		p := test.BuildScheduledPod(name, 0, 0, owner, "n1")
		p.OwnerReferences[0].Kind = kind
		p.Labels = map[string]string{"app": owner, "pod-template-hash": "5d8f"}
		p.Spec.Containers[0].Resources = apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   apiv1.ResourceList{apiv1.ResourceMemory: resource.MustParse("64Mi")},
		}
		obj, err := c.pod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*apiv1.Pod)
	}
	a, b := pod("web-1", "web", "ReplicaSet", "250m"), pod("web-2", "web", "ReplicaSet", "0.25")
	if !same(a.Labels, b.Labels) {
		t.Errorf("replicas' equal labels not shared")
	}
	ra, rb := a.Spec.Containers[0].Resources, b.Spec.Containers[0].Resources
	if !same(ra.Requests, rb.Requests) || !same(ra.Limits, rb.Limits) {
		t.Errorf("replicas' equal requests (250m and 0.25) or limits not shared")
	}
	if c := pod("big-1", "web", "ReplicaSet", "500m"); same(c.Spec.Containers[0].Resources.Requests, ra.Requests) ||
		c.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 500 || !same(c.Spec.Containers[0].Resources.Limits, ra.Limits) {
		t.Errorf("other requests shared, or equal limits not: %v", c.Spec.Containers[0].Resources)
	}
	if d := pod("api-1", "api", "ReplicaSet", "250m"); same(d.Labels, a.Labels) || d.Labels["app"] != "api" {
		t.Errorf("other labels shared: %v", d.Labels)
	}
	x, y := pod("db-0", "db", "StatefulSet", "250m"), pod("db-1", "db", "StatefulSet", "250m")
	if same(x.Labels, y.Labels) {
		t.Errorf("a StatefulSet's pods share labels")
	}
	if !same(x.Spec.Containers[0].Resources.Requests, ra.Requests) {
		t.Errorf("a StatefulSet pod's requests not shared")
	}
}

// Nodes of a size share their capacity and allocatable.
func TestCacheSharesNodesResourceLists(t *testing.T) {
	c := New()
	node := func(name string, cpu int64) *apiv1.Node {
		obj, _ := c.node(test.BuildNode(name, cpu, 4*test.GiB))
		return obj.(*apiv1.Node)
	}
	a, b, big := node("a", 2000), node("b", 2000), node("c", 4000)
	if !same(a.Status.Capacity, b.Status.Capacity) || !same(a.Status.Allocatable, b.Status.Allocatable) {
		t.Errorf("equal nodes' resource lists not shared")
	}
	if same(a.Status.Capacity, big.Status.Capacity) || big.Status.Capacity.Cpu().MilliValue() != 4000 {
		t.Errorf("a bigger node's capacity shared: %v", big.Status.Capacity)
	}
}

// A full table starts over: what it shared stays shared, what comes next
// is shared anew, and the table never grows past its bound.
func TestShareTableStartsOverWhenFull(t *testing.T) {
	table := map[string]map[string]string{}
	labelSet := func(app string) map[string]string {
		m := map[string]string{"app": app}
		return share(table, labelsKey(m), m)
	}
	first := labelSet("first")
	for i := 0; i < maxShared; i++ {
		labelSet(fmt.Sprint(i))
	}
	if len(table) > maxShared {
		t.Fatalf("%d label sets held, bound %d", len(table), maxShared)
	}
	again := labelSet("first")
	if same(again, first) || again["app"] != "first" {
		t.Errorf("a label set from before the table started over is still looked up")
	}
	if !same(labelSet("first"), again) {
		t.Errorf("the new table does not share")
	}
}

// Pods with equal tolerations (the two DefaultTolerationSeconds adds to
// nearly every pod) share one list; other seconds, or another order of
// the same tolerations, keep their own.
func TestCacheSharesTolerations(t *testing.T) {
	c := New()
	secs := func(n int64) *int64 { return &n }
	pod := func(name string, ts ...apiv1.Toleration) *apiv1.Pod {
		p := test.BuildScheduledPod(name, 100, 0, "web", "n1")
		p.Spec.Tolerations = ts
		obj, err := c.pod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*apiv1.Pod)
	}
	notReady := func(n int64) apiv1.Toleration {
		return apiv1.Toleration{Key: apiv1.TaintNodeNotReady, Operator: apiv1.TolerationOpExists, Effect: apiv1.TaintEffectNoExecute, TolerationSeconds: secs(n)}
	}
	unreachable := apiv1.Toleration{Key: apiv1.TaintNodeUnreachable, Operator: apiv1.TolerationOpExists, Effect: apiv1.TaintEffectNoExecute, TolerationSeconds: secs(300)}
	a, b := pod("a", notReady(300), unreachable), pod("b", notReady(300), unreachable)
	if !same(a.Spec.Tolerations, b.Spec.Tolerations) {
		t.Errorf("equal tolerations not shared")
	}
	if c := pod("c", notReady(60), unreachable); same(c.Spec.Tolerations, a.Spec.Tolerations) || *c.Spec.Tolerations[0].TolerationSeconds != 60 {
		t.Errorf("tolerations with other seconds shared: %v", c.Spec.Tolerations)
	}
	if d := pod("d", unreachable, notReady(300)); same(d.Spec.Tolerations, a.Spec.Tolerations) || d.Spec.Tolerations[0].Key != apiv1.TaintNodeUnreachable {
		t.Errorf("tolerations in another order shared: %v", d.Spec.Tolerations)
	}
	if e := pod("e", apiv1.Toleration{Key: apiv1.TaintNodeNotReady, Operator: apiv1.TolerationOpExists, Effect: apiv1.TaintEffectNoExecute}, unreachable); same(e.Spec.Tolerations, a.Spec.Tolerations) {
		t.Errorf("a toleration without seconds shared with one of 300 s")
	}
	if cap(a.Spec.Tolerations) != len(a.Spec.Tolerations) {
		t.Errorf("shared list has room to append into (cap %d, len %d)", cap(a.Spec.Tolerations), len(a.Spec.Tolerations))
	}
}

// roundTrip returns a copy of obj decoded from its JSON.
func roundTrip[T any](t *testing.T, obj T) T {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameString tells whether two strings are one allocation.
func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// Objects decoded one by one hold one copy of the strings they repeat:
// nodes' label keys and values and taints, pods' namespace, owner, node,
// scheduler and image. What each holds of its own (name, hostname label)
// stays its own, and every value reads as decoded.
func TestCacheSharesRepeatedStrings(t *testing.T) {
	c := New()
	// Through JSON, so that no two objects share a string to begin with.
	decoded := func(obj any) any {
		t.Helper()
		switch o := obj.(type) {
		case *apiv1.Node:
			obj = roundTrip(t, o)
		case *apiv1.Pod:
			obj = roundTrip(t, o)
		}
		var out any
		var err error
		switch o := obj.(type) {
		case *apiv1.Node:
			out, err = c.node(o)
		case *apiv1.Pod:
			out, err = c.pod(o)
		}
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	node := func(name string) *apiv1.Node {
		n := test.BuildNode(name, 2000, 4*test.GiB)
		n.Labels = map[string]string{"doks.digitalocean.com/node-pool": "workers", apiv1.LabelHostname: name}
		n.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "batch", Effect: apiv1.TaintEffectNoSchedule}}
		n.Annotations = map[string]string{"csi.volume.kubernetes.io/nodeid": `{"dobs.csi.digitalocean.com":"1"}`}
		return decoded(n).(*apiv1.Node)
	}
	n1, n2 := node("n1"), node("n2")
	key := func(m map[string]string, want string) string {
		for k := range m {
			if k == want {
				return k
			}
		}
		t.Fatalf("label %s missing from %v", want, m)
		return ""
	}
	csi := "csi.volume.kubernetes.io/nodeid"
	if !sameString(key(n1.Annotations, csi), key(n2.Annotations, csi)) || sameString(n1.Annotations[csi], n2.Annotations[csi]) ||
		n2.Annotations[csi] != `{"dobs.csi.digitalocean.com":"1"}` {
		t.Errorf("annotations: want the key shared, the value each node's own and unchanged: %v", n2.Annotations)
	}
	pool := "doks.digitalocean.com/node-pool"
	if !sameString(key(n1.Labels, pool), key(n2.Labels, pool)) || !sameString(n1.Labels[pool], n2.Labels[pool]) {
		t.Errorf("nodes' pool label held twice")
	}
	if !sameString(n1.Spec.Taints[0].Key, n2.Spec.Taints[0].Key) || !sameString(n1.Spec.Taints[0].Value, n2.Spec.Taints[0].Value) {
		t.Errorf("nodes' taint held twice")
	}
	if n1.Labels[apiv1.LabelHostname] != "n1" || n2.Labels[apiv1.LabelHostname] != "n2" || n2.Labels[pool] != "workers" || n1.Spec.Taints[0].Effect != apiv1.TaintEffectNoSchedule {
		t.Errorf("labels or taints changed: %v, %v, %v", n1.Labels, n2.Labels, n1.Spec.Taints)
	}

	pod := func(name string) *apiv1.Pod {
		p := test.BuildScheduledPod(name, 100, test.MiB, "web", "n1")
		p.Namespace = "shop"
		p.Spec.SchedulerName = "default-scheduler"
		p.Spec.Containers[0].Image = "registry.digitalocean.com/shop/web:1.4"
		return decoded(p).(*apiv1.Pod)
	}
	a, b := pod("web-1"), pod("web-2")
	for _, pair := range [][2]string{
		{a.Namespace, b.Namespace}, {a.OwnerReferences[0].Name, b.OwnerReferences[0].Name}, {a.Spec.NodeName, b.Spec.NodeName},
		{a.Spec.SchedulerName, b.Spec.SchedulerName}, {a.Spec.Containers[0].Image, b.Spec.Containers[0].Image},
		{a.Spec.NodeName, n1.Name},
	} {
		if !sameString(pair[0], pair[1]) {
			t.Errorf("%q held twice", pair[0])
		}
	}
	if a.Name != "web-1" || b.Name != "web-2" || a.Namespace != "shop" || b.Spec.Containers[0].Image != "registry.digitalocean.com/shop/web:1.4" {
		t.Errorf("pods changed: %s/%s, %s/%s", a.Namespace, a.Name, b.Namespace, b.Name)
	}
}
