package digitalocean

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func withUnavailableTTL(d time.Duration) envOption {
	return func(_ *testEnv, _ *clientOptions, opts *config.AutoscalingOptions) { opts.UnavailableSizeTTL = d }
}

// A resize refused for capacity holds the size unavailable in the region,
// for every pool of it: no further create or resize of the size is sent
// before the TTL ends (one refused request per size and TTL), the groups
// say why, and the size is not offered for pools on demand; after the TTL
// it is asked again.
func TestSizeRefusedForCapacityIsHeldPerSizeForTheTTL(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(`{"sizes": ["s-*"]}`), withUnavailableTTL(3*time.Minute))
	a := e.pool(doks.PoolSpec{Name: "a", Size: "s-4vcpu-8gb", Count: 1, AutoScale: true, MinNodes: 0, MaxNodes: 5})
	b := e.pool(doks.PoolSpec{Name: "b", Size: "s-4vcpu-8gb", Count: 1, AutoScale: true, MinNodes: 0, MaxNodes: 5})
	e.refresh()
	e.sim.SetOutOfStock("s-4vcpu-8gb", time.Hour)

	err := e.group(a.ID).IncreaseSize(1)
	su, ok := cloudprovider.AsSizeUnavailable(err)
	if !ok || su.Size != "s-4vcpu-8gb" || su.Region != doks.DefaultRegion || !strings.Contains(su.Message, doks.SizeUnavailableMessage) {
		t.Fatalf("IncreaseSize of a size out of stock: %v, want a SizeUnavailableError in %s", err, doks.DefaultRegion)
	}
	// Pool b, same size: not asked.
	if _, ok := cloudprovider.AsSizeUnavailable(e.group(b.ID).IncreaseSize(1)); !ok {
		t.Fatal("pool b of the same size: want a SizeUnavailableError without a request")
	}
	if _, err := e.p.NewNodeGroup("s-4vcpu-8gb", nil, nil, nil, nil); err == nil {
		t.Fatal("a pool on demand of the held size may be planned")
	}
	if n := e.sim.StockRefusals("s-4vcpu-8gb"); n != 1 {
		t.Fatalf("%d requests refused for the size, want 1 per TTL", n)
	}
	if why := e.group(b.ID).Unavailable(); !strings.Contains(why, "size s-4vcpu-8gb unavailable until") {
		t.Fatalf("Unavailable = %q", why)
	}
	sizes, err := e.p.GetAvailableMachineTypes()
	if err != nil || slices.Contains(sizes, "s-4vcpu-8gb") || !slices.Contains(sizes, "s-8vcpu-16gb") {
		t.Fatalf("offered sizes %v (%v): want the next sizes, not s-4vcpu-8gb", sizes, err)
	}
	// After the TTL the size is asked again (and refused again here).
	e.advance(3*time.Minute + time.Second)
	if why := e.group(b.ID).Unavailable(); why != "" {
		t.Fatalf("after the TTL: Unavailable = %q, want none", why)
	}
	_ = e.group(b.ID).IncreaseSize(1)
	if n := e.sim.StockRefusals("s-4vcpu-8gb"); n != 2 {
		t.Fatalf("%d refusals after the TTL, want 2", n)
	}
}

// A droplet-limit 422 is no capacity refusal: the size is not held.
func TestDropletLimitIsNotASizeRefusal(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1, DropletLimit: 1})
	a := e.pool(doks.PoolSpec{Name: "a", Size: "s-4vcpu-8gb", Count: 1, AutoScale: true, MinNodes: 0, MaxNodes: 5})
	e.refresh()
	err := e.group(a.ID).IncreaseSize(1)
	if _, ok := cloudprovider.AsAccountLimit(err); !ok {
		t.Fatalf("IncreaseSize at the droplet limit: %v, want an AccountLimitError", err)
	}
	if _, ok := cloudprovider.AsSizeUnavailable(err); ok || e.group(a.ID).Unavailable() != "" {
		t.Fatal("the droplet limit held the size unavailable")
	}
}

// Nodes that never came hold their size unavailable, learnt per size; the
// Sizes API's available flag is honoured before any request.
func TestNodesNeverCameAndTheCatalogue(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(`{"sizes": ["s-*", "gpu-*"]}`), withUnavailableTTL(3*time.Minute))
	a := e.pool(doks.PoolSpec{Name: "a", Size: "gpu-h100x1-80gb", Count: 1, AutoScale: true, MinNodes: 0, MaxNodes: 5})
	e.refresh()
	e.group(a.ID).NodesNeverCame()
	if why := e.group(a.ID).Unavailable(); !strings.Contains(why, "did not register within --max-node-provision-time") {
		t.Fatalf("Unavailable = %q", why)
	}
	if sizes, _ := e.p.GetAvailableMachineTypes(); slices.Contains(sizes, "gpu-h100x1-80gb") {
		t.Fatalf("offered %v: the size whose nodes never came is offered", sizes)
	}
	before := e.sim.RequestCount(doks.OpUpdateNodePool)
	if _, ok := cloudprovider.AsSizeUnavailable(e.group(a.ID).IncreaseSize(1)); !ok || e.sim.RequestCount(doks.OpUpdateNodePool) != before {
		t.Fatal("a resize of the held size was sent")
	}
	e.sim.SetSizeAvailable("gpu-l40sx1-48gb", false)
	e.advance(25 * time.Hour) // the catalogue is fetched again
	if sizes, _ := e.p.GetAvailableMachineTypes(); slices.Contains(sizes, "gpu-l40sx1-48gb") || !slices.Contains(sizes, "gpu-h100x1-80gb") {
		t.Fatalf("offered %v: want gpu-l40sx1-48gb left out (available false) and gpu-h100x1-80gb back after the TTL", sizes)
	}
}

// A pool creation refused for capacity: a SizeUnavailableError (the core
// then plans again without the size), the size no longer offered.
func TestCreateRefusedForCapacity(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(`{"sizes": ["s-*"]}`), withUnavailableTTL(3*time.Minute))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()
	e.sim.SetOutOfStock("s-8vcpu-16gb", time.Hour)
	_, err := e.plannedGroup("s-8vcpu-16gb").CreateWithSize(2)
	if _, ok := cloudprovider.AsSizeUnavailable(err); !ok {
		t.Fatalf("create of a size out of stock: %v, want a SizeUnavailableError", err)
	}
	if sizes, _ := e.p.GetAvailableMachineTypes(); slices.Contains(sizes, "s-8vcpu-16gb") {
		t.Fatalf("offered %v after the refusal", sizes)
	}
	if why := e.p.m.creationStopped(); why != "" {
		t.Fatalf("creation stopped after a capacity refusal: %s", why)
	}
}

// Which 422 messages are taken for "this size here, not now".
func TestCapacityWords(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{doks.SizeUnavailableMessage, true},
		{"gpu-h100x1-80gb is out of stock in nyc2", true},
		{"insufficient capacity for the requested droplets", true},
		{"nyc1 cannot host more droplets of this type right now", true},
		{"creating this/these droplet(s) will exceed your droplet limit", false},
		{`a node pool named "ca-gpu-h100x1-80gb-1" already exists`, false},
		{"name must be a valid DNS label", false},
	} {
		if got := capacityWords(c.msg, "gpu-h100x1-80gb", "nyc1"); got != c.want {
			t.Errorf("capacityWords(%q) = %v, want %v", c.msg, got, c.want)
		}
	}
}
