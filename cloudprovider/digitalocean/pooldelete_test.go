package digitalocean

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// Tags of a pool node autoprovisioning created, and of one made by hand
// for tags mode with the same bounds.
var (
	createdTags = []string{TagAutoprovisioned, TagAutoscalerEnabled, TagPrefixMinNodes + "0", TagPrefixMaxNodes + "4"}
	handTags    = []string{TagAutoscalerEnabled, TagPrefixMinNodes + "0", TagPrefixMaxNodes + "4"}
)

// Scale-down removing every node of a pool this autoscaler created deletes
// the pool with one DeleteNodePool instead of its nodes; any other removal
// (part of a pool, a pool made by hand, autoprovisioning off, nodes still
// to come) deletes nodes and never the pool.
func TestDeleteNodesDeletesACreatedPoolOnlyWhenItTakesEveryNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tags    []string
		nap     bool
		count   int
		grow    int     // nodes asked for before the deletion, still to come
		batches [][]int // DeleteNodes calls, by node index
		// wantPool: the pool is deleted (one DeleteNodePool) instead of
		// nodes; nodeDeletes: DELETE .../nodes/<id> requests.
		wantPool    bool
		nodeDeletes int
	}{
		{name: "created pool, every node in one call (empty nodes)", tags: createdTags, nap: true, count: 2,
			batches: [][]int{{0, 1}}, wantPool: true},
		{name: "created pool, node by node (drains)", tags: createdTags, nap: true, count: 2,
			batches: [][]int{{0}, {1}}, wantPool: true, nodeDeletes: 1},
		{name: "part of a created pool", tags: createdTags, nap: true, count: 3,
			batches: [][]int{{0, 1}}, nodeDeletes: 2},
		{name: "created pool with a node still to come", tags: createdTags, nap: true, count: 2, grow: 1,
			batches: [][]int{{0, 1}}, nodeDeletes: 2},
		{name: "pool made by hand, emptied", tags: handTags, nap: true, count: 2,
			batches: [][]int{{0, 1}}, nodeDeletes: 2},
		{name: "created pool, autoprovisioning off", tags: createdTags, count: 2,
			batches: [][]int{{0, 1}}, nodeDeletes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []envOption{withSelection(SelectByTags)}
			if tc.nap {
				opts = append(opts, withAutoprovisioning(napSection))
			}
			e := newEnv(t, doks.Options{DeleteDelay: -1}, opts...)
			p := e.pool(doks.PoolSpec{Name: "pool", Size: "s-2vcpu-4gb", Count: tc.count, Tags: tc.tags})
			e.refresh()
			g := e.group(p.ID)
			if tc.grow > 0 {
				if err := g.IncreaseSize(tc.grow); err != nil {
					t.Fatal(err)
				}
			}
			for _, batch := range tc.batches {
				var nodes []*apiv1.Node
				for _, i := range batch {
					nodes = append(nodes, kubeNode(p.Nodes[i]))
				}
				if err := g.DeleteNodes(nodes); err != nil {
					t.Fatalf("DeleteNodes(%v): %v", batch, err)
				}
			}
			poolDeletes := e.sim.RequestCount(doks.OpDeleteNodePool)
			if got := e.sim.RequestCount(doks.OpDeleteNode); got != tc.nodeDeletes || poolDeletes != map[bool]int{true: 1}[tc.wantPool] {
				t.Fatalf("%d node deletes and %d pool deletes, want %d and %v", got, poolDeletes, tc.nodeDeletes, tc.wantPool)
			}
			if n, _ := g.TargetSize(); n != tc.count+tc.grow-len(slices.Concat(tc.batches...)) {
				t.Errorf("target %d after the deletion", n)
			}
			if g.Exist() == tc.wantPool {
				t.Fatalf("after the deletion: group exists %v, want %v", g.Exist(), !tc.wantPool)
			}
			if !tc.wantPool {
				return
			}
			// DOKS drains the deleted pool's nodes; the core sees them leave.
			for _, n := range e.simPool(p.ID).Nodes {
				if n.Status.State != doks.StateDraining && n.Status.State != doks.StateDeleting {
					t.Errorf("node %s of the deleted pool is %s", n.Name, n.Status.State)
				}
			}
			ins, _ := g.Nodes()
			for _, in := range ins {
				if in.Status == nil || in.Status.State != cloudprovider.InstanceDeleting {
					t.Errorf("instance %s of the deleted pool: %+v, want deleting", in.Id, in.Status)
				}
			}
			// The deleted group refuses changes; Delete has nothing left to do.
			if err := g.IncreaseSize(1); err == nil || !strings.Contains(err.Error(), "was deleted") {
				t.Errorf("IncreaseSize of the deleted pool: %v", err)
			}
			before := e.sim.TotalRequests()
			if err := g.Delete(); err != nil {
				t.Fatalf("Delete after the pool went with its nodes: %v", err)
			}
			if e.sim.TotalRequests() != before {
				t.Error("Delete of a pool already deleted called the API")
			}
			if slices.ContainsFunc(e.p.NodeGroups(), func(ng cloudprovider.NodeGroup) bool { return ng.Id() == p.ID }) {
				t.Error("the deleted pool is still a node group")
			}
		})
	}
}

// A refused DeleteNodePool deletes nothing: the pool and its nodes stay,
// with their count, for the core to give the nodes back.
func TestWholeCreatedPoolDeleteRefused(t *testing.T) {
	e := newEnv(t, doks.Options{DeleteDelay: -1}, withSelection(SelectByTags), withAutoprovisioning(napSection))
	p := e.pool(doks.PoolSpec{Name: "pool", Size: "s-2vcpu-4gb", Count: 1, Tags: createdTags})
	e.refresh()
	g := e.group(p.ID)
	e.sim.InjectFault(doks.Fault{Operation: doks.OpDeleteNodePool, Status: http.StatusForbidden, Message: "You are not authorized"})
	endsWithError(t, g.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0])}), "You are not authorized")
	if n, _ := g.TargetSize(); !g.Exist() || n != 1 || e.sim.RequestCount(doks.OpDeleteNode) != 0 {
		t.Errorf("after a refused pool delete: exists %v, target %d, %d node deletes", g.Exist(), n, e.sim.RequestCount(doks.OpDeleteNode))
	}
	if st := e.simPool(p.ID).Nodes[0].Status.State; st != doks.StateRunning {
		t.Errorf("node is %s after a refused pool delete", st)
	}
}

// A pool deleted while a Refresh lists it (DOKS may still list a pool it
// drains) is no node group again.
func TestDeletedPoolStillListedIsNoGroup(t *testing.T) {
	e := newEnv(t, doks.Options{DeleteDelay: -1}, withSelection(SelectByTags), withAutoprovisioning(napSection))
	p := e.pool(doks.PoolSpec{Name: "pool", Size: "s-2vcpu-4gb", Count: 1, Tags: createdTags})
	e.refresh()
	// Answer the list with the pool as it was, as a listing taken before
	// the deletion would.
	listing := e.simPool(p.ID)
	if err := e.group(p.ID).DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0])}); err != nil {
		t.Fatal(err)
	}
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/node_pools") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		body, _ := json.Marshal(map[string]any{"node_pools": []godo.KubernetesNodePool{listing}, "meta": map[string]int{"total": 1}})
		_, _ = w.Write(body)
		return true
	})
	e.refresh()
	if slices.ContainsFunc(e.p.NodeGroups(), func(ng cloudprovider.NodeGroup) bool { return ng.Id() == p.ID }) {
		t.Error("a pool this autoscaler deleted is a node group again")
	}
}

func TestTemplateDifference(t *testing.T) {
	res := func(milli int64, mem string) *godo.KubernetesNodePoolResources {
		return &godo.KubernetesNodePoolResources{CpuMilliCores: milli, Memory: mem}
	}
	tmpl := func(capacity, alloc *godo.KubernetesNodePoolResources, gpus int64) *godo.KubernetesNodeTemplate {
		t := &godo.KubernetesNodeTemplate{Capacity: capacity, Allocatable: alloc}
		if gpus > 0 {
			t.Gpu = &godo.KubernetesNodePoolGPUResources{Count: gpus}
		}
		return t
	}
	predicted := tmpl(res(2000, "4096Mi"), res(1800, "3000Mi"), 0)
	for _, tc := range []struct {
		name   string
		actual *godo.KubernetesNodeTemplate
		want   []string // "" for none
	}{
		{"equal", tmpl(res(2000, "4096Mi"), res(1800, "3000Mi"), 0), nil},
		{"equal memory in other units", tmpl(res(2000, "4Gi"), res(1800, "3000Mi"), 0), nil},
		{"allocatable cpu", tmpl(res(2000, "4096Mi"), res(1900, "3000Mi"), 0),
			[]string{"allocatable.cpu_milli_cores predicted 1800, real 1900"}},
		{"allocatable memory", tmpl(res(2000, "4096Mi"), res(1800, "2900Mi"), 0),
			[]string{"allocatable.memory predicted 3000Mi, real 2900Mi"}},
		{"capacity and gpu", tmpl(res(4000, "4096Mi"), res(1800, "3000Mi"), 1),
			[]string{"capacity.cpu_milli_cores predicted 2000, real 4000", "gpu.count predicted 0, real 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := templateDifference(predicted, tc.actual)
			if len(tc.want) == 0 {
				if d != "" {
					t.Errorf("difference %q, want none", d)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(d, w) {
					t.Errorf("difference %q does not name %q", d, w)
				}
			}
		})
	}
}

// Once a created pool's real template is fetched it is compared with the
// one its creation was decided on: a difference is logged once, naming
// it; a prediction that matches logs nothing at the default verbosity.
func TestCreatedPoolTemplateComparedWithThePrediction(t *testing.T) {
	for _, tc := range []struct {
		name string
		// same: a pool of the size exists, so the prediction copies its
		// allocatable and matches; without one the reservations are
		// guessed on the safe side and differ from the simulator's.
		same bool
		want string
	}{
		{name: "guessed reservations differ", want: "allocatable.cpu_milli_cores predicted"},
		{name: "copied from a pool of the size", same: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureLogs(t)
			e := newEnv(t, doks.Options{}, withAutoprovisioning(napSection))
			e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 2})
			if tc.same {
				e.pool(doks.PoolSpec{Name: "same", Size: "s-4vcpu-8gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 2})
			}
			e.refresh()
			planned, err := e.p.NewNodeGroup("s-4vcpu-8gb", nil, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			created, err := planned.(*NodeGroup).CreateWithSize(1)
			if err != nil {
				t.Fatal(err)
			}
			e.refresh()
			e.refresh() // compared once, not at every fetch
			klog.Flush()
			const differs = "Created node pool's template differs from the one predicted"
			if tc.want == "" {
				if n := logs.count('I', differs); n != 0 {
					t.Errorf("%d difference lines for a prediction that matches:\n%s", n, logs.buf.String())
				}
				return
			}
			if n := logs.count('I', differs); n != 1 || logs.count('I', tc.want) != 1 || logs.count('I', created.(*NodeGroup).name) == 0 {
				t.Errorf("want one line naming the pool %s and %q:\n%s", created.(*NodeGroup).name, tc.want, logs.buf.String())
			}
		})
	}
}
