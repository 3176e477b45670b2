package digitalocean

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func TestSizePreferenceValidation(t *testing.T) {
	base := `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "autoprovisioning": {"sizes": ["gpu-*", "s-2vcpu-4gb"], "size_preference": %s}}`
	for _, c := range []struct{ name, list, want string }{
		{"absent", `null`, ""},
		{"in order", `["gpu-h100x1-80gb", "gpu-l40sx1-48gb", "gpu-mi300x1-192gb"]`, ""},
		{"one", `["s-2vcpu-4gb"]`, ""},
		{"empty list", `[]`, "autoprovisioning.size_preference is empty: leave it out"},
		{"empty string", `["gpu-h100x1-80gb", ""]`, "autoprovisioning.size_preference[1] is empty: want a droplet size slug"},
		{"wildcard", `["gpu-*"]`, `autoprovisioning.size_preference[0] "gpu-*" is not a size slug: want lower-case letters, digits and '-', no wildcards`},
		{"upper case", `["GPU-H100X1-80GB"]`, `autoprovisioning.size_preference[0] "GPU-H100X1-80GB" is not a size slug`},
		{"space", `["gpu-h100x1-80gb "]`, `autoprovisioning.size_preference[0] "gpu-h100x1-80gb " is not a size slug`},
		{"long value", `["` + strings.Repeat("a", 70) + `"]`, "autoprovisioning.size_preference[0] (a value of 70 characters) is not a size slug"},
		{"twice", `["gpu-h100x1-80gb", "gpu-l40sx1-48gb", "gpu-h100x1-80gb"]`, `autoprovisioning.size_preference[2] "gpu-h100x1-80gb" is listed twice (first at [0])`},
		{"not allowed", `["gpu-h100x1-80gb", "s-4vcpu-8gb"]`,
			`autoprovisioning.size_preference[1] "s-4vcpu-8gb" is not allowed by autoprovisioning.sizes ["gpu-*" "s-2vcpu-4gb"]: a preferred size must also be allowed`},
		{"not a list", `"gpu-h100x1-80gb"`, `field "autoprovisioning.size_preference" must be a []string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig([]byte(fmt.Sprintf(base, c.list)))
			endsWithError(t, err, c.want)
		})
	}
}

// A preferred size the Sizes API does not list is an error naming the
// entry once the catalogue is known, and is never offered; sizes not
// listed are never offered, however cheap.
func TestSizePreferenceAgainstTheCatalogue(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1},
		withAutoprovisioning(`{"sizes": ["gpu-*"], "size_preference": ["gpu-h999x1-1gb", "gpu-l40sx1-48gb"]}`))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()
	got, err := e.p.GetAvailableMachineTypes()
	if err != nil || !slices.Equal(got, []string{"gpu-l40sx1-48gb"}) {
		t.Fatalf("offered %v (%v), want [gpu-l40sx1-48gb]: the unknown size left out, gpu-4000adax1-20gb (cheaper, not listed) never", got, err)
	}
	errs := e.p.m.autoprovisioning.unknownPreferred(e.p.m.pricing.cachedCatalog())
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `autoprovisioning.size_preference[0] "gpu-h999x1-1gb" is not a size the Sizes API lists`) {
		t.Fatalf("unknown preferred sizes: %v", errs)
	}
}

// firstPreferred is the planner's rule with a preference
// (MachineTypesByPreference): the first offered size; every size here fits
// the pods and the limits, so the first offered is the one created.
func firstPreferred(t *testing.T, e *testEnv) string {
	t.Helper()
	if !e.p.MachineTypesByPreference() {
		t.Fatal("MachineTypesByPreference is false with size_preference set")
	}
	sizes, err := e.p.GetAvailableMachineTypes()
	if err != nil || len(sizes) == 0 {
		t.Fatalf("offered %v (%v)", sizes, err)
	}
	return sizes[0]
}

// H100 then L40S: H100 is created though L40S is cheaper; H100 refused for
// capacity (the simulator's 422) is held, so the next decision (the same
// loop's new round) takes L40S; after --unavailable-size-ttl H100 is first
// again.
func TestSizePreferenceFallsBackWhileTheFirstIsUnavailable(t *testing.T) {
	const h100, l40s = "gpu-h100x1-80gb", "gpu-l40sx1-48gb"
	e := newEnv(t, doks.Options{BootDelay: -1},
		withAutoprovisioning(`{"sizes": ["gpu-*"], "size_preference": ["`+h100+`", "`+l40s+`"]}`), withUnavailableTTL(3*time.Minute))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()

	if got, _ := e.p.GetAvailableMachineTypes(); !slices.Equal(got, []string{h100, l40s}) {
		t.Fatalf("offered %v, want [%s %s]: the preference's order, not the price's", got, h100, l40s)
	}
	e.sim.SetOutOfStock(h100, time.Hour)
	size := firstPreferred(t, e)
	if size != h100 {
		t.Fatalf("first decision %s, want %s", size, h100)
	}
	_, err := e.plannedGroup(size).CreateWithSize(1)
	if _, ok := cloudprovider.AsSizeUnavailable(err); !ok {
		t.Fatalf("create of %s out of stock: %v, want a SizeUnavailableError", h100, err)
	}
	if size = firstPreferred(t, e); size != l40s {
		t.Fatalf("decision after the refusal %s, want %s", size, l40s)
	}
	g, err := e.plannedGroup(size).CreateWithSize(1)
	if err != nil || g.(*NodeGroup).size() != l40s {
		t.Fatalf("create of %s: %v", l40s, err)
	}
	if n := e.sim.StockRefusals(h100); n != 1 {
		t.Fatalf("%d requests for %s refused, want 1 per TTL", n, h100)
	}

	e.advance(3*time.Minute + time.Second)
	e.sim.SetOutOfStock(h100, 0)
	if size = firstPreferred(t, e); size != h100 {
		t.Fatalf("decision after the TTL %s, want %s again", size, h100)
	}
	if g, err := e.plannedGroup(size).CreateWithSize(1); err != nil || g.(*NodeGroup).size() != h100 {
		t.Fatalf("create of %s after the TTL: %v", h100, err)
	}
}

// Without a preference the order is the price's, and the planner is told so.
func TestNoSizePreferenceIsCheapestFirst(t *testing.T) {
	e := newEnv(t, doks.Options{}, withAutoprovisioning(`{"sizes": ["gpu-h100x1-80gb", "gpu-l40sx1-48gb"]}`))
	e.refresh()
	if e.p.MachineTypesByPreference() {
		t.Fatal("MachineTypesByPreference without size_preference")
	}
	if got, _ := e.p.GetAvailableMachineTypes(); !slices.Equal(got, []string{"gpu-l40sx1-48gb", "gpu-h100x1-80gb"}) {
		t.Fatalf("offered %v, want the cheapest first", got)
	}
}
