package digitalocean

import (
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

const cfgHead = `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t"`

// price_overrides is validated before anything starts; every error names
// the field and the entry.
func TestPriceOverridesAreValidated(t *testing.T) {
	cases := []struct{ name, json, wantErr string }{
		{"valid", `"price_overrides": {"gpu-h100x1-80gb": 2.5, "gpu-b200x8-contract": 40}`, ""},
		{"negative", `"price_overrides": {"gpu-h100x1-80gb": -1}`, `price_overrides["gpu-h100x1-80gb"]: -1 is not a price`},
		{"zero", `"price_overrides": {"s-2vcpu-4gb": 0}`, `price_overrides["s-2vcpu-4gb"]: 0 is not a price`},
		{"a typo in thousands", `"price_overrides": {"s-2vcpu-4gb": 3500}`, `price_overrides["s-2vcpu-4gb"]: 3500 is not a price`},
		{"not a slug", `"price_overrides": {"S 2vcpu": 1}`, `price_overrides: "S 2vcpu" is not a size slug`},
		{"a string price", `"price_overrides": {"s-2vcpu-4gb": "0.03"}`, "price_overrides"},
		{"per-pool limit", `"autoprovisioning": {"sizes": ["s-*"], "max_hourly_cost_per_pool": 2.5}`, ""},
		{"per-pool limit below a cent", `"autoprovisioning": {"sizes": ["s-*"], "max_hourly_cost_per_pool": 0.001}`, "autoprovisioning.max_hourly_cost_per_pool 0.001 is not a limit"},
		{"per-pool limit negative", `"autoprovisioning": {"sizes": ["s-*"], "max_hourly_cost_per_pool": -3}`, "autoprovisioning.max_hourly_cost_per_pool -3 is not a limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseConfig([]byte(cfgHead + ", " + c.json + "}"))
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if c.name == "per-pool limit" && cfg.autoprovisioning.maxHourlyCostCents != 250 {
					t.Fatalf("cents = %d, want 250", cfg.autoprovisioning.maxHourlyCostCents)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

// An override replaces the Sizes API's price (a contract price) and prices
// a size the catalogue does not list; without one such a size has no
// price, and the error says where to give it.
func TestPriceOverrides(t *testing.T) {
	e := newEnv(t, doks.Options{}, withCloudConfig(`"price_overrides": {"s-2vcpu-4gb": 0.02, "gpu-b200x8-contract": 45.5}`))
	e.pool(autoscaled("a", 1, 0, 3))
	e.refresh()
	model, err := e.p.Pricing()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	price := func(slug string) (float64, error) {
		n := &apiv1.Node{}
		n.Labels = map[string]string{apiv1.LabelInstanceTypeStable: slug}
		return model.NodePrice(n, start, start.Add(time.Hour))
	}
	if got, err := price("s-2vcpu-4gb"); err != nil || got != 0.02 {
		t.Errorf("overridden listed size: %v, %v; want 0.02", got, err)
	}
	if got, err := price("gpu-b200x8-contract"); err != nil || got != 45.5 {
		t.Errorf("size the catalogue lacks: %v, %v; want 45.5", got, err)
	}
	if got, err := price("s-4vcpu-8gb"); err != nil || got < 0.0714 || got > 0.0715 {
		t.Errorf("size not overridden: %v, %v; want the Sizes API's 0.07143", got, err)
	}
	if _, err := price("gpu-unlisted"); err == nil || !strings.Contains(err.Error(), "price_overrides") {
		t.Errorf("size neither listed nor overridden: %v, want an error naming price_overrides", err)
	}
	// The ranking of offered sizes sees the override too.
	for _, s := range e.p.pricing.sizes {
		if s.Slug == "s-2vcpu-4gb" && s.PriceHourly != 0.02 {
			t.Errorf("catalogue price of s-2vcpu-4gb = %v, want the override", s.PriceHourly)
		}
	}
}

// An override prices its size while the Sizes API cannot be read (a token
// without sizes:read, or the API down).
func TestPriceOverrideWithoutTheSizesAPI(t *testing.T) {
	e := newEnv(t, doks.Options{}, withCloudConfig(`"price_overrides": {"gpu-h100x1-80gb": 2.5}`))
	e.sim.InjectFault(doks.Fault{Operation: doks.OpListSizes, Status: 403})
	model, _ := e.p.Pricing()
	n := &apiv1.Node{}
	n.Labels = map[string]string{apiv1.LabelInstanceTypeStable: "gpu-h100x1-80gb"}
	if got, err := model.NodePrice(n, time.Unix(0, 0), time.Unix(3600, 0)); err != nil || got != 2.5 {
		t.Fatalf("NodePrice = %v, %v; want the override 2.5", got, err)
	}
}

// A pool's hourly limit is its k8s-cluster-autoscaler-max-hourly-cost-cents
// tag (DigitalOcean tags hold no decimal point); a malformed one refuses
// the pool as a node group, since a misread limit would not bound it.
func TestPoolHourlyCostTag(t *testing.T) {
	e := newEnv(t, doks.Options{}, withSelection(SelectByTags))
	tags := func(extra ...string) []string {
		return append([]string{TagAutoscalerEnabled, TagPrefixMinNodes + "0", TagPrefixMaxNodes + "10"}, extra...)
	}
	limited := e.pool(doks.PoolSpec{Name: "limited", Size: "s-2vcpu-4gb", Count: 1, Tags: tags(TagPrefixMaxHourlyCostCents + "250")})
	plain := e.pool(doks.PoolSpec{Name: "plain", Size: "s-2vcpu-4gb", Count: 1, Tags: tags()})
	e.pool(doks.PoolSpec{Name: "bad", Size: "s-2vcpu-4gb", Count: 1, Tags: tags(TagPrefixMaxHourlyCostCents + "2.50")})
	e.refresh()
	var g cloudprovider.NodeGroup = e.group(limited.ID)
	l, ok := g.(cloudprovider.HourlyCostLimiter)
	if !ok || l.MaxHourlyCost() != 2.5 {
		t.Fatalf("limited pool: MaxHourlyCost %v (limiter %v), want 2.5", l.MaxHourlyCost(), ok)
	}
	if got := e.group(plain.ID).MaxHourlyCost(); got != 0 {
		t.Fatalf("untagged pool: %v, want 0 (none)", got)
	}
	if n := len(e.p.NodeGroups()); n != 2 {
		t.Fatalf("%d node groups, want 2: the pool with a malformed limit is refused", n)
	}
}

// Pools created on demand carry autoprovisioning.max_hourly_cost_per_pool
// as their tag, so the limit outlives the process that created them.
func TestCreatedPoolCarriesItsHourlyLimit(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1}, withAutoprovisioning(`{"sizes": ["s-*"], "max_hourly_cost_per_pool": 0.5}`))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()
	planned := e.plannedGroup("s-4vcpu-8gb")
	if got := planned.MaxHourlyCost(); got != 0.5 {
		t.Fatalf("planned group: MaxHourlyCost %v, want 0.5", got)
	}
	made, err := planned.CreateWithSize(1)
	if err != nil {
		t.Fatal(err)
	}
	e.refresh()
	var tagged bool
	for _, p := range e.sim.ListedPools() {
		if p.Name == made.Id() || p.ID == made.Id() {
			for _, tag := range p.Tags {
				tagged = tagged || tag == TagPrefixMaxHourlyCostCents+"50"
			}
		}
	}
	if !tagged {
		t.Fatalf("created pool's tags lack %s50: %v", TagPrefixMaxHourlyCostCents, e.sim.ListedPools())
	}
	for _, g := range e.p.NodeGroups() {
		if g.Autoprovisioned() && g.(*NodeGroup).MaxHourlyCost() != 0.5 {
			t.Fatalf("listed created pool: MaxHourlyCost %v, want 0.5", g.(*NodeGroup).MaxHourlyCost())
		}
	}
}
