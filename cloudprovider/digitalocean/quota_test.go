package digitalocean

import (
	"errors"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// The droplet limit and count are read at the first Refresh and then every
// quotaTTL (two requests), not every loop; between reads the count follows
// the cluster's pools as listed.
func TestDropletQuotaIsReadRarelyAndFollowsTheListings(t *testing.T) {
	e := newEnv(t, doks.Options{DropletLimit: 10}, withQuota())
	e.sim.SetOtherDroplets(4)
	p := e.pool(autoscaled("a", 3, 0, 10))
	e.refresh()
	q, known := e.p.InstanceQuota()
	if !known || q.Limit != 10 || q.Instances != 7 || q.Headroom != 3 {
		t.Fatalf("quota %+v (known %v), want limit 10, 7 droplets, 3 left", q, known)
	}
	if err := e.group(p.ID).IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	e.refresh()
	if q, _ := e.p.InstanceQuota(); q.Instances != 9 || q.Headroom != 1 {
		t.Fatalf("after growing the pool by 2: %+v, want 9 droplets, 1 left", q)
	}
	if a, d := e.sim.RequestCount(doks.OpGetAccount), e.sim.RequestCount(doks.OpListDroplets); a != 1 || d != 1 {
		t.Fatalf("%d account and %d droplet reads in 3 loops, want 1 each", a, d)
	}
	// The cluster's own growth took the account to its limit: read again
	// a minute after the last read, not after the TTL.
	if err := e.group(p.ID).IncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	e.sim.SetDropletLimit(12)
	e.advance(61 * time.Second)
	e.refresh()
	if q, _ := e.p.InstanceQuota(); q.Limit != 12 || q.Headroom != 2 {
		t.Fatalf("at the limit by the cluster's own growth, a minute later: %+v, want the limit read again (12, 2 left)", q)
	}
	e.sim.SetDropletLimit(10)
	// Droplets made elsewhere are seen at the next read.
	e.sim.SetOtherDroplets(4)
	e.advance(11 * time.Minute)
	e.refresh()
	if q, _ := e.p.InstanceQuota(); q.Instances != 10 || q.Headroom != 0 {
		t.Fatalf("after the TTL: %+v, want 10 droplets, none left", q)
	}
	if a := e.sim.RequestCount(doks.OpGetAccount); a != 3 {
		t.Fatalf("%d account reads after the TTL, want 3", a)
	}
	// At the limit it is read every minute: a raised limit is seen soon.
	e.sim.SetDropletLimit(20)
	e.advance(61 * time.Second)
	e.refresh()
	if q, _ := e.p.InstanceQuota(); q.Limit != 20 || q.Headroom != 10 {
		t.Fatalf("a minute after the limit was raised: %+v, want limit 20, 10 left", q)
	}
}

// A refusal at the limit has the quota read again at the next Refresh.
func TestDropletLimitRefusalRereadsTheQuota(t *testing.T) {
	e := newEnv(t, doks.Options{DropletLimit: 5}, withQuota())
	p := e.pool(autoscaled("a", 3, 0, 10))
	e.refresh()
	e.sim.SetOtherDroplets(2) // made elsewhere since the read
	err := e.group(p.ID).IncreaseSize(1)
	var al *cloudprovider.AccountLimitError
	if !errors.As(err, &al) {
		t.Fatalf("IncreaseSize past the limit: %v, want an AccountLimitError", err)
	}
	e.refresh()
	if q, _ := e.p.InstanceQuota(); q.Headroom != 0 || q.Instances != 5 {
		t.Fatalf("after the refusal: %+v, want the quota read again: 5 droplets, none left", q)
	}
	if a := e.sim.RequestCount(doks.OpGetAccount); a != 2 {
		t.Fatalf("%d account reads, want 2 (the refusal made it due)", a)
	}
}

// Without droplet:read the quota is unknown (the 422 handling stays), read
// again only after the TTL, and the Refresh does not fail.
func TestDropletQuotaWithoutDropletRead(t *testing.T) {
	e := newEnv(t, doks.Options{DropletLimit: 5}, withQuota())
	e.sim.SetTokenWithoutDropletRead(testToken)
	e.pool(autoscaled("a", 1, 0, 10))
	e.refresh()
	e.refresh()
	if q, known := e.p.InstanceQuota(); known {
		t.Fatalf("quota %+v known without droplet:read", q)
	}
	if a, d := e.sim.RequestCount(doks.OpGetAccount), e.sim.RequestCount(doks.OpListDroplets); a != 1 || d != 0 {
		t.Fatalf("%d account and %d droplet reads, want 1 and 0 (no droplet_limit in the answer)", a, d)
	}
	// The account endpoint down: unknown too, the Refresh succeeds.
	e.sim.InjectFault(doks.Fault{Operation: doks.OpGetAccount, Status: 403})
	e.advance(11 * time.Minute)
	e.refresh()
	if _, known := e.p.InstanceQuota(); known {
		t.Fatal("quota known after a 403")
	}
}
