package digitalocean

import (
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// A pool creation whose answer was lost survives a leader change: the next
// leader, whose listings still lag, plans the same pool, sends its create
// under the same name, and DigitalOcean's "already exists" tells it the
// pool is there: it counts it as being created and adopts it when listed.
// One pool, never two.
func TestLostCreateSurvivesALeaderChange(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(napSection))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()
	e.sim.SetListLag(time.Hour)
	e.sim.InjectFault(doks.Fault{Operation: doks.OpCreateNodePool, Times: 1, Status: 504, Applied: true})
	first, err := e.plannedGroup("s-8vcpu-16gb").CreateWithSize(2)
	if err != nil {
		t.Fatalf("a lost answer: %v, want the pool counted as being created", err)
	}

	// The leader changes; the new one knows nothing of the creation.
	e.p = e.restart()
	e.refresh()
	second, err := e.plannedGroup("s-8vcpu-16gb").CreateWithSize(2)
	if err != nil {
		t.Fatalf("the new leader's create: %v, want the existing pool taken as being created", err)
	}
	if second.Id() != first.Id() {
		t.Errorf("the new leader's pool is %s, the first leader's %s: want the same name", second.Id(), first.Id())
	}
	e.refresh()
	if got := e.targets()[first.Id()]; got != 2 {
		t.Errorf("while the listing lags: targets %v, want %s at 2 (its nodes upcoming)", e.targets(), first.Id())
	}
	if why := e.p.m.creationStopped(); why != "" {
		t.Errorf("creation stopped: %s", why)
	}

	e.sim.EndListLag()
	e.refresh()
	if pools := e.sim.ListedPools(); len(pools) != 2 {
		t.Fatalf("%d pools, want base and one created", len(pools))
	}
	created := e.sim.ListedPools()[1]
	if got := e.targets(); len(got) != 1 || got[created.ID] != 2 {
		t.Errorf("after the listing shows it: targets %v, want only %s at 2", got, created.ID)
	}
	if p := e.p.Problems(); len(p) != 0 {
		t.Errorf("problems %v", p)
	}
}
