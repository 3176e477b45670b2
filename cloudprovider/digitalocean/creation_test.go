package digitalocean

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// plannedGroup is a planned group of the size, with no labels or taints.
func (e *testEnv) plannedGroup(size string) *NodeGroup {
	e.t.Helper()
	g, err := e.p.NewNodeGroup(size, nil, nil, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return g.(*NodeGroup)
}

// targets are the node groups' target sizes by ID.
func (e *testEnv) targets() map[string]int {
	out := map[string]int{}
	for _, g := range e.p.NodeGroups() {
		out[g.Id()], _ = g.TargetSize()
	}
	return out
}

// A create whose answer is lost (a 504 or a cut connection after DOKS made
// the pool, or a 201 whose body holds no pool) is not an error and is
// never sent again: the pool counts as a node group of its name with the
// nodes asked for (upcoming to the core) while the listings lag, and the
// listed pool takes its place.
func TestUnclearCreateIsAdoptedFromTheListing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault doks.Fault
	}{
		{"504 after applying", doks.Fault{Status: 504, Applied: true}},
		{"cut connection after applying", doks.Fault{Cut: true, Applied: true}},
		// A 201 whose body holds no pool: DigitalOcean made it, the
		// answer cannot say which.
		{"201 with {}", doks.Fault{ReplaceBody: true, Body: "{}"}},
		{"201 with an empty body", doks.Fault{ReplaceBody: true}},
		{"201 with a null pool", doks.Fault{ReplaceBody: true, Body: `{"node_pool":null}`}},
		{"201 with a pool without an ID", doks.Fault{ReplaceBody: true, Body: `{"node_pool":{"name":"x"}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(napSection))
			e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
			e.refresh()
			e.sim.SetListLag(time.Hour)
			f := tc.fault
			f.Operation, f.Times = doks.OpCreateNodePool, 1
			e.sim.InjectFault(f)

			made, err := e.plannedGroup("s-8vcpu-16gb").CreateWithSize(2)
			if err != nil {
				t.Fatalf("CreateWithSize after a lost answer: %v, want the pool counted as being created", err)
			}
			name := made.Id()
			if !made.Exist() || !made.Autoprovisioned() || !strings.HasPrefix(name, "ca-s-8vcpu-16gb-") {
				t.Errorf("group %s: exist %v, autoprovisioned %v", name, made.Exist(), made.Autoprovisioned())
			}
			if err := made.IncreaseSize(1); err == nil {
				t.Error("IncreaseSize of a pool not listed yet: want an error, not a PUT to an unknown ID")
			}
			// Listings lag: still a node group with its nodes to come.
			e.refresh()
			e.refresh()
			if got := e.targets()[name]; got != 2 {
				t.Errorf("while the listing lags: targets %v, want %s at 2", e.targets(), name)
			}
			if why := e.p.m.creationStopped(); why != "" {
				t.Errorf("creation stopped while a pool is being created: %s", why)
			}

			e.sim.EndListLag()
			e.refresh()
			pools := e.sim.ListedPools()
			if len(pools) != 2 {
				t.Fatalf("%d pools, want base and one created", len(pools))
			}
			created := pools[1]
			if created.Name != name {
				t.Errorf("created pool %q, want the name sent, %q", created.Name, name)
			}
			if got := e.targets(); len(got) != 1 || got[created.ID] != 2 {
				t.Errorf("after the listing shows it: targets %v, want only %s at 2", got, created.ID)
			}
			if got := e.sim.RequestCount(doks.OpCreateNodePool); got != 1 {
				t.Errorf("%d creation requests, want 1", got)
			}
			if p := e.p.Problems(); len(p) != 0 {
				t.Errorf("problems %v, want none", p)
			}
		})
	}
}

// A create that was lost before DOKS applied it is waited for until
// createListDeadline: then its nodes are no longer upcoming, the problem
// is reported, and node pool creation pauses for the initial backoff.
func TestCreationNeverListedPausesCreation(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(napSection))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()
	e.sim.InjectFault(doks.Fault{Operation: doks.OpCreateNodePool, Status: 502, Times: 1})
	made, err := e.plannedGroup("s-8vcpu-16gb").CreateWithSize(2)
	if err != nil {
		t.Fatal(err)
	}
	e.advance(createListDeadline - time.Second)
	e.refresh()
	if _, ok := e.targets()[made.Id()]; !ok {
		t.Fatal("before the deadline the creation is no longer a node group")
	}

	e.advance(time.Second)
	e.refresh()
	if _, ok := e.targets()[made.Id()]; ok {
		t.Error("past the deadline the creation is still a node group")
	}
	if p := e.p.Problems(); len(p) != 1 || !strings.Contains(p[0], made.Id()+", whose creation was sent at") {
		t.Errorf("problems %v, want the creation never listed", p)
	}
	if _, err := e.p.GetAvailableMachineTypes(); !errors.Is(err, cloudprovider.ErrCreationStopped) {
		t.Errorf("GetAvailableMachineTypes: %v, want creation stopped", err)
	}
	if _, err := e.plannedGroup("s-4vcpu-8gb").CreateWithSize(1); !errors.Is(err, cloudprovider.ErrCreationStopped) {
		t.Errorf("CreateWithSize while stopped: %v", err)
	}

	e.advance(5 * time.Minute) // --initial-node-group-backoff-duration's default
	e.refresh()
	if _, err := e.p.GetAvailableMachineTypes(); err != nil {
		t.Errorf("after the pause: %v", err)
	}
	if p := e.p.Problems(); len(p) != 0 {
		t.Errorf("after the pause: problems %v", p)
	}
	if got := e.sim.RequestCount(doks.OpCreateNodePool); got != 1 {
		t.Errorf("%d creation requests, want 1", got)
	}
}

// A token that cannot see tags makes every pool this autoscaler would
// create unrecognisable: no pool is created, in either selection mode,
// and the problem names the scope.
func TestTokenWithoutTagReadCreatesNoPool(t *testing.T) {
	for _, mode := range []string{SelectByAutoScale, SelectByTags} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, doks.Options{}, withAutoprovisioning(napSection), withSelection(mode))
			e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 3})
			e.sim.SetTokenWithoutTagRead(testToken)
			e.refresh()
			_, err := e.p.GetAvailableMachineTypes()
			if !errors.Is(err, cloudprovider.ErrCreationStopped) || !strings.Contains(err.Error(), "tag:read") {
				t.Errorf("GetAvailableMachineTypes: %v, want creation stopped naming tag:read", err)
			}
			if _, err := e.plannedGroup("s-8vcpu-16gb").CreateWithSize(1); !errors.Is(err, cloudprovider.ErrCreationStopped) {
				t.Errorf("CreateWithSize: %v, want creation stopped", err)
			}
			if got := e.sim.RequestCount(doks.OpCreateNodePool); got != 0 {
				t.Errorf("%d creation requests, want none", got)
			}
			if p := strings.Join(e.p.Problems(), "\n"); !strings.Contains(p, "node autoprovisioning") || !strings.Contains(p, "tag:read") {
				t.Errorf("problems %q, want autoprovisioning's naming tag:read", p)
			}
		})
	}
}

// A 201 that shows the created pool without the ownership tag (the token
// lost tag:read, or tagging at creation needs tag:create) stops creation
// at once: the pool is counted as being created (its nodes come), but no
// second one is made, and the problem names both scopes.
func TestCreatedPoolWithoutItsTagStopsCreation(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(napSection))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()
	e.sim.SetTokenWithoutTagRead(testToken)
	made, err := e.plannedGroup("s-8vcpu-16gb").CreateWithSize(2)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := made.TargetSize(); n != 2 {
		t.Errorf("created target %d, want 2", n)
	}
	if _, err := e.plannedGroup("s-4vcpu-8gb").CreateWithSize(1); !errors.Is(err, cloudprovider.ErrCreationStopped) ||
		!strings.Contains(err.Error(), "tag:create") {
		t.Errorf("a second creation: %v, want creation stopped naming tag:create", err)
	}
	e.refresh()
	p := strings.Join(e.p.Problems(), "\n")
	if !strings.Contains(p, "were created by this autoscaler with the tag "+TagAutoprovisioned) || !strings.Contains(p, "tag:read") {
		t.Errorf("problems %q", p)
	}
	if _, err := e.p.GetAvailableMachineTypes(); !errors.Is(err, cloudprovider.ErrCreationStopped) {
		t.Errorf("GetAvailableMachineTypes after the refresh: %v", err)
	}
	if got := e.sim.RequestCount(doks.OpCreateNodePool); got != 1 {
		t.Errorf("%d creation requests, want 1", got)
	}
	if sp := e.simPool(made.Id()); !slices.Contains(sp.Tags, TagAutoprovisioned) {
		t.Errorf("the created pool's tags %v: the tag was sent, only not shown", sp.Tags)
	}
}
