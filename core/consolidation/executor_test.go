package consolidation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

type fakeProvisioner struct {
	calls int
	err   error
}

func (p *fakeProvisioner) Provision(cloudprovider.NodeGroup, int, *framework.NodeInfo, time.Time) error {
	p.calls++
	return p.err
}

// fakeDrainer records the nodes handed to it and ends their removals as
// told (none: they stay in flight).
type fakeDrainer struct {
	drained  []string
	outcomes map[string]deletiontracker.Outcome
	ended    func(node, group string, o deletiontracker.Outcome)
}

func (d *fakeDrainer) Drain(_ context.Context, nodes []*scaledown.UnneededNode) {
	for _, u := range nodes {
		d.drained = append(d.drained, u.Node.Name)
		if o, ok := d.outcomes[u.Node.Name]; ok {
			d.ended(u.Node.Name, u.GroupID, o)
		}
	}
}

// replaceSetup is a node "big" of 8 cpu at $6/h with a 1.5 cpu pod and a
// full node, and the command that replaces big by one 2 cpu node.
func replaceSetup(t *testing.T) (*cluster, Command) {
	c := newCluster()
	c.node("big", 8000, 6, 1500)
	c.node("full", 2000, 1, 2000)
	r := replacement("s-2vcpu", 2000, 1)
	r.Template.Node().Labels[apiv1.LabelInstanceTypeStable] = "s-2vcpu"
	cmd := Plan(c.input(t, []string{"big"}, 1, 0.1, r))
	if cmd == nil || cmd.Kind != Replace {
		t.Fatalf("setup: got %v", cmd)
	}
	return c, *cmd
}

func (c *cluster) view(t *testing.T, now time.Time) View {
	t.Helper()
	snap := simulator.NewClusterSnapshot()
	if err := snap.SetClusterState(c.nodes, c.pods); err != nil {
		t.Fatal(err)
	}
	byNode := map[string][]*apiv1.Pod{}
	for _, p := range c.pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	return View{Nodes: c.nodes, PodsByNode: byNode, Ready: func(*apiv1.Node) bool { return true }, Snapshot: snap,
		Checker: sdtest.Checker(t), DrainOptions: sdtest.DrainOptions(sdtest.Options()), PDBs: c.pdbs, Now: now}
}

func (c *cluster) addReplacementNode(name string) *apiv1.Node {
	n := c.node(name, 2000, 1)
	n.Labels[apiv1.LabelInstanceTypeStable] = "s-2vcpu"
	return n
}

func newTestExecutor() (*Executor, *fakeProvisioner, *fakeDrainer) {
	p := &fakeProvisioner{}
	d := &fakeDrainer{outcomes: map[string]deletiontracker.Outcome{}}
	e := NewExecutor(p, d, func(*Replacement) time.Duration { return 10 * time.Minute })
	d.ended = e.RemovalEnded
	return e, p, d
}

// Make before break: nothing is drained until the new node is Ready and the
// command still holds; the replacement is asked for once, however many
// loops the wait takes.
func TestExecutorReplaceMakesBeforeBreak(t *testing.T) {
	c, cmd := replaceSetup(t)
	e, prov, dr := newTestExecutor()
	ctx := context.Background()
	t0 := sdtest.T0
	if out := e.Start(ctx, cmd, c.view(t, t0)); out != nil {
		t.Fatalf("start: %v", out)
	}
	for i := 1; i <= 3; i++ {
		if out := e.Step(ctx, c.view(t, t0.Add(time.Duration(i)*time.Minute))); out != nil {
			t.Fatalf("step %d: %v", i, out)
		}
	}
	if prov.calls != 1 || len(dr.drained) != 0 {
		t.Fatalf("while the replacement comes: %d provision call(s), drained %v; want 1 and none", prov.calls, dr.drained)
	}
	if _, phase, _ := e.InFlight(); phase != Provisioning {
		t.Fatalf("phase %q", phase)
	}
	c.addReplacementNode("new-1")
	dr.outcomes["big"] = deletiontracker.Deleted
	if out := e.Step(ctx, c.view(t, t0.Add(4*time.Minute))); len(out) != 1 || out[0].Result != DrainStarted || len(out[0].Evicted) != 1 {
		t.Fatalf("step with the new node: %v, want the drain started with big's one pod", out)
	}
	if strings.Join(dr.drained, ",") != "big" {
		t.Fatalf("drained %v, want big", dr.drained)
	}
	out := e.Step(ctx, c.view(t, t0.Add(5*time.Minute)))
	if len(out) != 1 || out[0].Result != Succeeded || prov.calls != 1 {
		t.Fatalf("got %v (%d provision calls), want one success", out, prov.calls)
	}
	if cur, _, _ := e.InFlight(); cur != nil {
		t.Error("the executor must be idle after the end")
	}
}

// Every failure before the drain aborts with nothing drained; the new
// nodes, if any, are left as ordinary nodes.
func TestExecutorReplaceAborts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		provErr error
		change  func(c *cluster)
		after   time.Duration
		want    string
	}{
		{name: "the replacement is refused", provErr: errors.New("422 droplet limit"), want: "adding 1 s-2vcpu node(s) failed"},
		{name: "the replacement is not Ready in time", after: 11 * time.Minute, want: "0 of 1 new s-2vcpu node(s) Ready"},
		{name: "a pod no longer fits once the replacement is Ready", change: func(c *cluster) {
			c.addReplacementNode("new-1")
			c.node("spare", 2000, 1, 1000) // not enough: the big pod wants 1.5 cpu and new-1 takes a grown pod
			for _, p := range c.pods {
				if p.Spec.NodeName == "big" {
					p.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse("2500m")
				}
			}
		}, after: time.Minute, want: "no longer fit"},
		{name: "the node is marked not to be disrupted meanwhile", change: func(c *cluster) {
			c.addReplacementNode("new-1")
			for _, n := range c.nodes {
				if n.Name == "big" {
					n.Annotations = map[string]string{drain.DoNotDisruptKey: "true"}
				}
			}
		}, after: time.Minute, want: "marked not to be disrupted"},
		{name: "a pod is marked not to be disrupted meanwhile", change: func(c *cluster) {
			c.addReplacementNode("new-1")
			for _, p := range c.pods {
				if p.Spec.NodeName == "big" {
					p.Annotations = map[string]string{drain.SafeToEvictKey: "false"}
				}
			}
		}, after: time.Minute, want: "marked not to be disrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cmd := replaceSetup(t)
			e, prov, dr := newTestExecutor()
			prov.err = tc.provErr
			ctx := context.Background()
			out := e.Start(ctx, cmd, c.view(t, sdtest.T0))
			if out == nil {
				if tc.change != nil {
					tc.change(c)
				}
				out = e.Step(ctx, c.view(t, sdtest.T0.Add(tc.after)))
			}
			if len(out) != 1 || out[0].Result != Aborted || !strings.Contains(out[0].Reason, tc.want) {
				t.Fatalf("got %+v, want an abort with %q", out, tc.want)
			}
			if len(dr.drained) != 0 {
				t.Errorf("drained %v after an abort before the drain", dr.drained)
			}
			if cur, _, _ := e.InFlight(); cur != nil {
				t.Error("the executor must be idle after an abort")
			}
		})
	}
}

func TestExecutorDelete(t *testing.T) {
	c := newCluster()
	c.node("a", 4000, 4, 1000)
	c.node("b", 4000, 4, 1000)
	c.node("c", 4000, 4, 1000)
	cmd := Plan(c.input(t, []string{"a", "b", "c"}, 2, 0.1))
	if cmd == nil || cmd.Key() != "delete:a,b" {
		t.Fatalf("setup: %v", cmd)
	}
	for _, tc := range []struct {
		name     string
		outcomes map[string]deletiontracker.Outcome
		want     Result
	}{
		{"both deleted", map[string]deletiontracker.Outcome{"a": deletiontracker.Deleted, "b": deletiontracker.Deleted}, Succeeded},
		{"one given back", map[string]deletiontracker.Outcome{"a": deletiontracker.Deleted, "b": deletiontracker.Failed}, Aborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, prov, dr := newTestExecutor()
			ctx := context.Background()
			e.Start(ctx, *cmd, c.view(t, sdtest.T0))
			if prov.calls != 0 || strings.Join(dr.drained, ",") != "a,b" {
				t.Fatalf("a delete drains at once and adds nothing: %d provision calls, drained %v", prov.calls, dr.drained)
			}
			if out := e.Step(ctx, c.view(t, sdtest.T0)); out != nil {
				t.Fatalf("before any removal ended: %v", out)
			}
			for n, o := range tc.outcomes {
				e.RemovalEnded(n, "g", o)
			}
			out := e.Step(ctx, c.view(t, sdtest.T0))
			if len(out) != 1 || out[0].Result != tc.want {
				t.Fatalf("got %+v, want %s", out, tc.want)
			}
		})
	}
}

// A command in flight holds its old nodes and the new nodes of its
// replacement's size from the other phases, and does not drain while
// scale-down's drains are in flight: their pods need room its simulation
// does not see.
func TestExecutorHoldsItsNodesAndWaitsForScaleDownDrains(t *testing.T) {
	c, cmd := replaceSetup(t)
	e, _, dr := newTestExecutor()
	ctx := context.Background()
	if held := e.Held(c.nodes, nil); held != nil {
		t.Fatalf("idle executor holds %v", held)
	}
	e.Start(ctx, cmd, c.view(t, sdtest.T0))
	if held := e.Held(c.nodes, nil); strings.Join(held, ",") != "big" {
		t.Fatalf("while provisioning it holds %v, want big", held)
	}
	c.addReplacementNode("new-1")
	c.node("other", 4000, 2) // another size: not the command's
	if held := e.Held(c.nodes, nil); strings.Join(held, ",") != "big,new-1" {
		t.Fatalf("with the replacement registered it holds %v, want big,new-1", held)
	}
	v := c.view(t, sdtest.T0.Add(time.Minute))
	v.Busy = "scale-down is draining 1 node(s)"
	if out := e.Step(ctx, v); out != nil || len(dr.drained) != 0 {
		t.Fatalf("drained %v (outcomes %v) while scale-down drains", dr.drained, out)
	}
	if out := e.Step(ctx, c.view(t, sdtest.T0.Add(2*time.Minute))); len(out) != 1 || out[0].Result != DrainStarted || strings.Join(dr.drained, ",") != "big" {
		t.Fatalf("once scale-down's drains ended: %v, drained %v; want big drained", out, dr.drained)
	}
}
