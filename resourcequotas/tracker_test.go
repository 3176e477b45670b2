package resourcequotas

import (
	"errors"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

const gib = 1 << 30

func node(name string, milliCPU, mem int64) *apiv1.Node {
	n := &apiv1.Node{}
	n.Name = name
	n.Status.Capacity = apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		apiv1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}
	return n
}

func tainted(n *apiv1.Node) *apiv1.Node {
	n.Spec.Taints = []apiv1.Taint{{Key: clusterstate.ToBeDeletedTaint, Effect: apiv1.TaintEffectNoSchedule}}
	return n
}

func TestLiveNodesHaveOneDefinition(t *testing.T) {
	nodes := []*apiv1.Node{node("a", 1000, gib), node("tracked", 1000, gib), tainted(node("tainted", 1000, gib))}
	beingDeleted := map[string]bool{"tracked": true}
	live := LiveNodes(nodes, beingDeleted)
	if len(live) != 1 || live[0].Name != "a" {
		t.Fatalf("live nodes = %v, want only a: a node tracked for deletion but not yet tainted is not live either", live)
	}
	tr := NewTracker(Limits{}, nodes, beingDeleted)
	if got := tr.Used(); got != (Totals{Nodes: 1, MilliCPU: 1000, Memory: gib}) {
		t.Fatalf("totals = %+v, want the live node's alone", got)
	}
}

func TestNewLimitsMergesFlagsAndLimiter(t *testing.T) {
	cases := []struct {
		name    string
		opts    config.AutoscalingOptions
		limiter *cloudprovider.ResourceLimiter
		err     error
		want    Limits
	}{
		{name: "flags alone", opts: config.AutoscalingOptions{MaxNodesTotal: 5, MinCoresTotal: 1, MaxCoresTotal: 8, MinMemoryTotal: 2, MaxMemoryTotal: 9},
			want: Limits{MaxNodes: 5, MinMilliCPU: 1000, MaxMilliCPU: 8000, MinMemory: 2, MaxMemory: 9}},
		{name: "the tighter maximum and the larger minimum win",
			opts: config.AutoscalingOptions{MinCoresTotal: 1, MaxCoresTotal: 8, MaxMemoryTotal: 9},
			limiter: cloudprovider.NewResourceLimiter(map[string]int64{cloudprovider.ResourceNameCores: 2},
				map[string]int64{cloudprovider.ResourceNameCores: 16, cloudprovider.ResourceNameMemory: 4}),
			want: Limits{MinMilliCPU: 2000, MaxMilliCPU: 8000, MaxMemory: 4}},
		{name: "a limiter maximum applies where the flag sets none",
			limiter: cloudprovider.NewResourceLimiter(nil, map[string]int64{cloudprovider.ResourceNameCores: 4}),
			want:    Limits{MaxMilliCPU: 4000}},
		{name: "limiter unavailable: the flags", opts: config.AutoscalingOptions{MaxCoresTotal: 8},
			err: errors.New("down"), want: Limits{MaxMilliCPU: 8000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := test.NewProvider()
			p.SetResourceLimiter(c.limiter)
			if c.err != nil {
				p.InjectError("GetResourceLimiter", c.err)
			}
			got, err := NewLimits(c.opts, p)
			if (err != nil) != (c.err != nil) {
				t.Fatalf("error = %v, want one: %v", err, c.err != nil)
			}
			if got != c.want {
				t.Fatalf("limits = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestRoom(t *testing.T) {
	nodes := []*apiv1.Node{node("a", 2000, 4*gib), node("b", 2000, 4*gib)}
	cases := []struct {
		name     string
		limits   Limits
		want     int
		wantRoom int
		wantStop Resource
	}{
		{"no limits", Limits{}, 5, 5, ""},
		{"node limit bounds", Limits{MaxNodes: 4}, 5, 2, ""},
		{"node limit reached", Limits{MaxNodes: 2}, 5, 0, Nodes},
		{"cpu bounds", Limits{MaxMilliCPU: 10000}, 5, 3, ""},
		{"cpu reached", Limits{MaxMilliCPU: 5000}, 5, 0, CPU},
		{"memory reached", Limits{MaxMemory: 9 * gib}, 5, 0, Memory},
		{"nodes are checked first", Limits{MaxNodes: 2, MaxMilliCPU: 4000}, 5, 0, Nodes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(c.limits, nodes, nil)
			room, stop := tr.Room(node("tmpl", 2000, 4*gib), c.want)
			if room != c.wantRoom || stop != c.wantStop {
				t.Fatalf("Room = %d, %q; want %d, %q", room, stop, c.wantRoom, c.wantStop)
			}
		})
	}
}

func TestAddCountsPlannedAndUpcomingNodes(t *testing.T) {
	tr := NewTracker(Limits{MaxNodes: 5}, []*apiv1.Node{node("a", 1000, gib)}, nil)
	p := test.NewProvider()
	up := tr.WithUpcoming([]clusterstate.NodeGroupState{
		{Group: p.AddNodeGroup("with-template", 0, 10, 2, nil), UpcomingUnregistered: 2},
		{Group: p.AddNodeGroup("without", 0, 10, 1, nil), UpcomingUnregistered: 1},
	}, func(id string) *apiv1.Node {
		if id == "with-template" {
			return node("t", 1000, gib)
		}
		return nil
	})
	if got := up.Used(); got != (Totals{Nodes: 4, MilliCPU: 3000, Memory: 3 * gib}) {
		t.Fatalf("with upcoming = %+v, want 4 nodes, the template's capacity for two", got)
	}
	if tr.Used().Nodes != 1 {
		t.Fatalf("WithUpcoming changed the original: %+v", tr.Used())
	}
	if room, stop := up.Room(node("t", 1000, gib), 3); room != 1 || stop != "" {
		t.Fatalf("Room = %d, %q; want 1 left under --max-nodes-total=5", room, stop)
	}
	up.Add(node("t", 1000, gib), 1)
	if _, stop := up.Room(node("t", 1000, gib), 1); stop != Nodes {
		t.Fatalf("after Add, Room stops with %q, want %q", stop, Nodes)
	}
}

func TestBoundByMaxNodes(t *testing.T) {
	cases := []struct {
		name                            string
		maxTotal, nodes, room, estimate int
		want                            bool
	}{
		{"no --max-nodes-total", 0, 10, 5, 5, false},
		{"no room left in the cluster", 10, 10, 0, 0, true},
		{"room is what the cluster has left, estimate takes it", 10, 7, 3, 3, true},
		{"room is what the cluster has left, estimate needs less", 10, 7, 3, 2, false},
		{"the group's own limit is tighter", 10, 2, 3, 3, false},
		{"no room because of the group's limits, cluster has some", 10, 2, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(Limits{MaxNodes: c.maxTotal}, nil, nil)
			tr.AddNodes(c.nodes)
			if got := tr.BoundByMaxNodes(c.room, c.estimate); got != c.want {
				t.Fatalf("BoundByMaxNodes(%d, %d) with %d of %d nodes = %v, want %v", c.room, c.estimate, c.nodes, c.maxTotal, got, c.want)
			}
		})
	}
}

func TestCheckRemoval(t *testing.T) {
	nodes := []*apiv1.Node{node("a", 2000, 4*gib), node("b", 2000, 4*gib)}
	cases := []struct {
		name   string
		limits Limits
		want   []Resource // for removing a, then b
	}{
		{"no minimums", Limits{}, []Resource{"", ""}},
		{"cpu minimum kept after one removal", Limits{MinMilliCPU: 2000}, []Resource{"", CPU}},
		{"memory minimum", Limits{MinMemory: 8 * gib}, []Resource{Memory, Memory}},
		{"cpu is named first", Limits{MinMilliCPU: 4000, MinMemory: 8 * gib}, []Resource{CPU, CPU}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(c.limits, nodes, nil)
			for i, n := range nodes {
				got := tr.CheckRemoval(n)
				if got != c.want[i] {
					t.Fatalf("CheckRemoval(%s) = %q, want %q", n.Name, got, c.want[i])
				}
				if got == "" {
					tr.Remove(n)
				}
			}
		})
	}
}
