package actuation

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// cachedRemoval is newRemoval with informer caches of the cluster's nodes
// and pods. With watching, a node's update reaches the node cache as the
// API server answers it, as a watch would deliver it; without, the cache
// keeps the nodes as they were (a lagging watch).
func cachedRemoval(t *testing.T, c *sdtest.Cluster, watching bool) (*removal, cache.Indexer) {
	t.Helper()
	r := newRemoval(c, sdtest.Options())
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range c.Nodes {
		if err := nodes.Add(n.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.Pods {
		if err := pods.Add(p.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	if watching {
		r.kube.PrependReactor("update", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if err := nodes.Update(action.(k8stesting.UpdateAction).GetObject().DeepCopyObject()); err != nil {
				t.Error(err)
			}
			return false, nil, nil
		})
	}
	r.a.deps.Nodes = corelisters.NewNodeLister(nodes)
	r.a.deps.Pods = corelisters.NewPodLister(pods)
	return r, pods
}

// podLists counts the pod lists sent to the API server.
func podLists(r *removal) int {
	n := 0
	for _, a := range r.kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

// Once the node cache shows a batch's taints, the check after the delay
// after taint reads the pod cache: empty nodes are deleted without a pod
// list a node, and a pod the cache holds on one of them keeps that node.
func TestDeleteEmptyChecksTheCacheOnceItShowsTheTaint(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 3)
	r, pods := cachedRemoval(t, c, true)
	// Bound after the plan, seen by the pod cache only.
	if err := pods.Add(test.BuildScheduledPod("late", 100, test.MiB, "rs-late", "g1-n1")); err != nil {
		t.Fatal(err)
	}

	r.a.DeleteEmpty(context.Background(), []*scaledown.UnneededNode{planned(c, "g1-n0"), planned(c, "g1-n1"), planned(c, "g1-n2")})

	if n := podLists(r); n != 0 {
		t.Errorf("pod lists sent to the API server = %d, want 0: the cache showed every taint", n)
	}
	if d := sdtest.Deletions(c.Provider); len(d) != 1 || d[0] != "g1:g1-n0,g1-n2" {
		t.Errorf("deletions = %v, want g1-n0 and g1-n2 in one call", d)
	}
	if r.outcomes["g1-n1"] != deletiontracker.Kept || r.tainted(t, "g1-n1") {
		t.Errorf("g1-n1: outcome %v, tainted %v; want kept and untainted: a pod arrived", r.outcomes["g1-n1"], r.tainted(t, "g1-n1"))
	}
}

// When the node cache does not show a node's taint after the delay (its
// watch lags), the cache is not trusted for that node: its pods are listed
// from the API server, which holds a pod the pod cache does not have yet.
func TestDeleteEmptyAsksTheAPIServerWhenTheCacheLags(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 2)
	r, _ := cachedRemoval(t, c, false)
	late := test.BuildScheduledPod("late", 100, test.MiB, "rs-late", "g1-n1")
	if err := r.kube.Tracker().Add(late); err != nil {
		t.Fatal(err)
	}

	r.a.DeleteEmpty(context.Background(), []*scaledown.UnneededNode{planned(c, "g1-n0"), planned(c, "g1-n1")})

	if n := podLists(r); n != 2 {
		t.Errorf("pod lists sent to the API server = %d, want 2 (one a node whose taint the cache did not show)", n)
	}
	if d := sdtest.Deletions(c.Provider); len(d) != 1 || d[0] != "g1:g1-n0" {
		t.Errorf("deletions = %v, want g1-n0 only", d)
	}
	if r.outcomes["g1-n1"] != deletiontracker.Kept {
		t.Errorf("g1-n1: outcome %v, want kept: a pod arrived", r.outcomes["g1-n1"])
	}
}
