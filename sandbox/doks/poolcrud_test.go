package doks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
)

func TestCreatePoolThroughTheAPI(t *testing.T) {
	_, c, _ := newTestServer(t, Options{BootDelay: -1})
	ctx := context.Background()
	p, resp, err := c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{
		Name: "big-1", Size: "s-8vcpu-16gb", Count: 2, Tags: []string{"mine"},
		Labels: map[string]string{"team": "a"}, Taints: []godo.Taint{{Key: "k", Value: "v", Effect: "NoSchedule"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 {
		t.Errorf("status %d, want 201", resp.StatusCode)
	}
	if p.Name != "big-1" || p.Size != "s-8vcpu-16gb" || p.Count != 2 || len(p.Nodes) != 2 || p.AutoScale {
		t.Errorf("created pool %+v", p)
	}
	for _, tag := range []string{"mine", "k8s", "k8s-worker", "k8s:" + testCluster} {
		if !slices.Contains(p.Tags, tag) {
			t.Errorf("tags %v lack %q", p.Tags, tag)
		}
	}
	if p.Nodes[0].Status.State != StateProvisioning {
		t.Errorf("new node state %q, want provisioning", p.Nodes[0].Status.State)
	}
	// It is a pool like any other: listed, with a template.
	pools, _, err := c.Kubernetes.ListNodePools(ctx, testCluster, nil)
	if err != nil || len(pools) != 1 || pools[0].ID != p.ID {
		t.Fatalf("listing after creation: %v %v", pools, err)
	}
	if _, _, err := c.Kubernetes.GetNodePoolTemplate(ctx, testCluster, "big-1"); err != nil {
		t.Errorf("template of the created pool: %v", err)
	}
}

// A pool's taints, sent by godo (whose Taint has no JSON tags: "Key",
// "Value", "Effect") or in the API's lower-case names, are stored, listed
// and in its template; a GPU pool also gets the vendor's GPU taint, as DOKS
// puts it on GPU pools itself, once even when asked for.
func TestCreatedPoolTaints(t *testing.T) {
	s, c, _ := newTestServer(t, Options{BootDelay: -1, Region: "tor1"})
	ctx := context.Background()
	sep := godo.Taint{Key: "dedicated", Value: "ml", Effect: "NoSchedule"}
	for _, tc := range []struct {
		name, size string
		taints     []godo.Taint
		want       []string
	}{
		{"cpu", "s-2vcpu-4gb", []godo.Taint{sep}, []string{"dedicated=ml:NoSchedule"}},
		{"nvidia", "gpu-h100x1-80gb", []godo.Taint{sep}, []string{"dedicated=ml:NoSchedule", "nvidia.com/gpu:NoSchedule"}},
		{"amd", "gpu-mi300x1-192gb", nil, []string{"amd.com/gpu:NoSchedule"}},
		{"gpu-taint-asked-for", "gpu-l40sx1-48gb", []godo.Taint{{Key: "nvidia.com/gpu", Effect: "NoSchedule"}}, []string{"nvidia.com/gpu:NoSchedule"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{
				Name: tc.name, Size: tc.size, Count: 1, Taints: tc.taints})
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, x := range p.Taints {
				listed = append(listed, x.String())
			}
			tmpl, _, err := c.Kubernetes.GetNodePoolTemplate(ctx, testCluster, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(listed, tc.want) || !slices.Equal(tmpl.Template.Taints, tc.want) {
				t.Errorf("taints listed %v, in the template %v; want %v", listed, tmpl.Template.Taints, tc.want)
			}
		})
	}
	// The API's own lower-case names.
	req, err := c.NewRequest(ctx, "POST", "/v2/kubernetes/clusters/"+testCluster+"/node_pools", map[string]any{
		"name": "lower", "size": "s-2vcpu-4gb", "count": 1,
		"taints": []map[string]string{{"key": "team", "value": "a", "effect": "NoExecute"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(s.Pools(), func(p godo.KubernetesNodePool) bool { return p.Name == "lower" })
	if i < 0 || len(s.Pools()[i].Taints) != 1 || s.Pools()[i].Taints[0].String() != "team=a:NoExecute" {
		t.Errorf("pool created with lower-case taint fields: %+v", s.Pools())
	}
}

func TestCreatePoolRefusals(t *testing.T) {
	s, c, _ := newTestServer(t, Options{DropletLimit: 3})
	mustPool(t, s, PoolSpec{Name: "taken", Size: "s-2vcpu-4gb", Count: 1})
	one, three := 1, 3
	for _, tc := range []struct {
		name string
		req  createPoolRequest
		want string
	}{
		{"unknown size", createPoolRequest{Name: "a", Size: "s-99vcpu", Count: &one}, "not a valid size"},
		{"size not in the region", createPoolRequest{Name: "a", Size: "gpu-mi300x1-192gb", Count: &one}, "not available in region nyc1"},
		{"upper-case name", createPoolRequest{Name: "Big", Size: "s-2vcpu-4gb", Count: &one}, `name "Big" is invalid`},
		{"name too long", createPoolRequest{Name: strings.Repeat("a", 64), Size: "s-2vcpu-4gb", Count: &one}, "is invalid"},
		{"name taken", createPoolRequest{Name: "taken", Size: "s-2vcpu-4gb", Count: &one}, "already exists"},
		{"no count", createPoolRequest{Name: "a", Size: "s-2vcpu-4gb"}, "count is required"},
		{"bad tag", createPoolRequest{Name: "a", Size: "s-2vcpu-4gb", Count: &one, Tags: []string{"a b"}}, `tag "a b" is invalid`},
		{"droplet limit", createPoolRequest{Name: "a", Size: "s-2vcpu-4gb", Count: &three}, DropletLimitMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := c.NewRequest(context.Background(), "POST", "/v2/kubernetes/clusters/"+testCluster+"/node_pools", tc.req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Do(context.Background(), req, nil)
			var er *godo.ErrorResponse
			if !errors.As(err, &er) || er.Response.StatusCode != 422 || !strings.Contains(er.Message, tc.want) {
				t.Fatalf("got %v, want 422 with %q", err, tc.want)
			}
		})
	}
	if n := len(s.Pools()); n != 1 {
		t.Errorf("%d pools after refused creations, want 1", n)
	}
}

// A ReplaceBody fault carries the write out and answers its own 2xx with
// the body given: a create is answered 201 and an update 202 with "{}", an
// empty body or a null pool, and the pool is made or resized all the same.
func TestReplaceBodyAnswersTheStatusWithoutThePool(t *testing.T) {
	s, c, _ := newTestServer(t, Options{BootDelay: -1})
	ctx := context.Background()
	path := "/v2/kubernetes/clusters/" + testCluster + "/node_pools"
	one, two := 1, 2
	byName := func(name string) *godo.KubernetesNodePool {
		for _, p := range s.Pools() {
			if p.Name == name {
				return &p
			}
		}
		return nil
	}
	for i, body := range []string{"{}", "", `{"node_pool":null}`} {
		name := fmt.Sprintf("p-%d", i)
		s.InjectFault(Fault{Operation: OpCreateNodePool, ReplaceBody: true, Body: body, Times: 1})
		req, err := c.NewRequest(ctx, "POST", path, createPoolRequest{Name: name, Size: "s-2vcpu-4gb", Count: &one})
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		resp, err := c.Do(ctx, req, &got)
		if err != nil || resp.StatusCode != 201 || got.String() != body {
			t.Fatalf("create answered with %q: status %v, body %q, error %v; want 201 and the body", body, resp, got.String(), err)
		}
		if p := byName(name); p == nil || p.Count != 1 {
			t.Fatalf("create answered with %q: pool %+v, want it made with 1 node", body, p)
		}

		s.InjectFault(Fault{Operation: OpUpdateNodePool, ReplaceBody: true, Body: body, Times: 1})
		req, err = c.NewRequest(ctx, "PUT", path+"/"+byName(name).ID, &godo.KubernetesNodePoolUpdateRequest{Count: &two})
		if err != nil {
			t.Fatal(err)
		}
		got.Reset()
		resp, err = c.Do(ctx, req, &got)
		if err != nil || resp.StatusCode != 202 || got.String() != body {
			t.Fatalf("update answered with %q: status %v, body %q, error %v; want 202 and the body", body, resp, got.String(), err)
		}
		if p := byName(name); p.Count != 2 {
			t.Errorf("update answered with %q: count %d, want 2", body, p.Count)
		}
	}
	// A refused create keeps its 422, without its body.
	s.InjectFault(Fault{Operation: OpCreateNodePool, ReplaceBody: true, Body: "{}", Times: 1})
	_, _, err := c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{Name: "p-0", Size: "s-2vcpu-4gb", Count: 1})
	var er *godo.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 422 {
		t.Errorf("a refused create: %v, want 422", err)
	}
	if n := s.RequestCount(OpCreateNodePool); n != 4 {
		t.Errorf("%d creation requests, want 4", n)
	}
}

// A deleted pool's droplets drain, then go, then the pool is forgotten.
// Meanwhile the API lists the pool (count 0, its nodes draining) or, with
// DeletedPoolsVanish, no longer shows it.
func TestDeletePoolDrainsThenForgetsIt(t *testing.T) {
	for _, vanish := range []bool{false, true} {
		t.Run(fmt.Sprintf("vanish=%v", vanish), func(t *testing.T) {
			s, c, _ := newTestServer(t, Options{DeleteDelay: 200 * time.Millisecond, DeletedPoolsVanish: vanish})
			p := mustPool(t, s, PoolSpec{Name: "gone", Size: "s-2vcpu-4gb", Count: 2})
			ctx := context.Background()
			resp, err := c.Kubernetes.DeleteNodePool(ctx, testCluster, p.ID)
			if err != nil || resp.StatusCode != 204 {
				t.Fatalf("delete: %v (status %v)", err, resp)
			}
			got, _, err := c.Kubernetes.GetNodePool(ctx, testCluster, p.ID)
			listed := s.ListedPools()
			if vanish {
				if statusOf(err) != 404 || len(listed) != 0 {
					t.Errorf("right after the deletion: GET %v, listed %v; want 404 and none", err, listed)
				}
			} else {
				if err != nil || got.Count != 0 || len(got.Nodes) != 2 || got.Nodes[0].Status.State != StateDraining {
					t.Errorf("GET right after the deletion: %+v, %v; want count 0 and two draining nodes", got, err)
				}
				if len(listed) != 1 || listed[0].ID != p.ID {
					t.Errorf("listed right after the deletion: %+v, want the pool", listed)
				}
			}
			if got := s.Pools(); len(got) != 1 || got[0].Nodes[0].Status.State != StateDraining {
				t.Errorf("droplets right after the deletion: %+v", got)
			}
			if _, err := c.Kubernetes.DeleteNodePool(ctx, testCluster, p.ID); statusOf(err) != 404 {
				t.Errorf("second delete: %v, want 404", err)
			}
			want := []Change{{Op: OpDeleteNodePool, Pool: p.ID}, {Op: OpDeleteNodePool, Pool: p.ID}}
			if got := s.Changes(); !slices.Equal(got, want) {
				t.Errorf("changes %+v, want the two pool deletes and nothing else", got)
			}
			waitFor(t, s, "the pool's droplets to go", func() bool { return len(s.Pools()) == 0 })
			if _, _, err := c.Kubernetes.GetNodePool(ctx, testCluster, p.ID); statusOf(err) != 404 {
				t.Errorf("GET once the droplets are gone: %v, want 404", err)
			}
			// The name is free again.
			if _, _, err := c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{Name: "gone", Size: "s-2vcpu-4gb", Count: 1}); err != nil {
				t.Errorf("re-using the name: %v", err)
			}
		})
	}
}

// With a listing lag a created pool is missing from the listings (the pool
// list and the cluster object) though it exists: its name is taken, as
// DigitalOcean keeps pool names unique per cluster, and its nodes are
// being made.
func TestListLagHidesACreatedPool(t *testing.T) {
	s, c, _ := newTestServer(t, Options{BootDelay: -1, ListLag: time.Hour})
	ctx := context.Background()
	req := &godo.KubernetesNodePoolCreateRequest{Name: "late-1", Size: "s-2vcpu-4gb", Count: 2}
	if _, _, err := c.Kubernetes.CreateNodePool(ctx, testCluster, req); err != nil {
		t.Fatal(err)
	}
	pools, _, err := c.Kubernetes.ListNodePools(ctx, testCluster, nil)
	if err != nil || len(pools) != 0 {
		t.Errorf("listing within the lag: %d pools (%v), want none", len(pools), err)
	}
	cl, _, err := c.Kubernetes.Get(ctx, testCluster)
	if err != nil || len(cl.NodePools) != 0 {
		t.Errorf("cluster within the lag: %d pools (%v), want none", len(cl.NodePools), err)
	}
	if got := s.ListedPools(); len(got) != 1 || len(got[0].Nodes) != 2 {
		t.Errorf("the simulator holds %v, want the pool with its 2 nodes", got)
	}
	_, resp, err := c.Kubernetes.CreateNodePool(ctx, testCluster, req)
	if err == nil || resp == nil || resp.StatusCode != 422 {
		t.Errorf("second create of the same name: %v, want a 422", err)
	}
	s.SetListLag(0)
	if _, _, err := c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{Name: "now-1", Size: "s-2vcpu-4gb", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if pools, _, _ := c.Kubernetes.ListNodePools(ctx, testCluster, nil); len(pools) != 1 || pools[0].Name != "now-1" {
		t.Errorf("after SetListLag(0) the new pool is listed at once; listed %d pools", len(pools))
	}
}

// The pool history keeps a pool created through the API after it is gone, with
// the times of its creation, of the accepted DELETE and of its last node going.
func TestPoolHistoryKeepsGonePools(t *testing.T) {
	s, c, _ := newTestServer(t, Options{DeleteDelay: 100 * time.Millisecond})
	mustPool(t, s, PoolSpec{Name: "made-by-hand", Size: "s-2vcpu-4gb", Count: 1})
	ctx := context.Background()
	p, _, err := c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{
		Name: "on-demand", Size: "s-2vcpu-4gb", Count: 1, Labels: map[string]string{"class": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubernetes.DeleteNodePool(ctx, testCluster, p.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, "the pool to go", func() bool { return len(s.Pools()) == 1 })
	h := s.PoolHistory()
	if len(h) != 2 || h[0].Name != "made-by-hand" || h[0].ByAPI || !h[0].Deleted.IsZero() {
		t.Fatalf("history %+v, want the hand-made pool first, live", h)
	}
	l := h[1]
	if l.ID != p.ID || !l.ByAPI || l.Labels["class"] != "a" || l.Size != "s-2vcpu-4gb" {
		t.Errorf("created pool's life %+v", l)
	}
	if l.Created.IsZero() || l.Deleted.Before(l.Created) || l.Gone.Before(l.Deleted) {
		t.Errorf("times created %v, deleted %v, gone %v: want all three in order", l.Created, l.Deleted, l.Gone)
	}
}
