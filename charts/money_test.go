package charts

import (
	"strings"
	"testing"
)

// maxHourlyCost becomes --max-hourly-cost; cloudConfig.priceOverrides and
// autoprovisioning.maxHourlyCostPerPool become cloud.json's fields, which
// the binary's own builder accepts; bad values fail helm install naming
// the value, as the binary would.
func TestChartMoneyLimits(t *testing.T) {
	t.Parallel()
	values := withClusterID(map[string]interface{}{
		"maxHourlyCost": 2.5,
		"cloudConfig": map[string]interface{}{
			"priceOverrides":   map[string]interface{}{"gpu-h100x1-80gb": 2.1, "gpu-b200x8-contract": 40},
			"autoprovisioning": map[string]interface{}{"sizes": []interface{}{"s-*"}, "maxHourlyCostPerPool": 1.25},
		},
		"extraArgs": map[string]interface{}{"node-autoprovisioning-enabled": true},
	})
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	if v, ok := b.Flag("max-hourly-cost"); !ok || v != "2.5" {
		t.Errorf("--max-hourly-cost = %q (present %v), want 2.5", v, ok)
	}
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.PriceOverrides["gpu-h100x1-80gb"] != 2.1 || cc.PriceOverrides["gpu-b200x8-contract"] != 40 {
		t.Errorf("price_overrides = %v", cc.PriceOverrides)
	}
	if cc.Autoprovisioning == nil || cc.Autoprovisioning.MaxHourlyCostPerPool == nil || *cc.Autoprovisioning.MaxHourlyCostPerPool != 1.25 {
		t.Errorf("autoprovisioning = %+v, want max_hourly_cost_per_pool 1.25", cc.Autoprovisioning)
	}
	if err := buildProvider(t, cc, true); err != nil {
		t.Errorf("the binary refuses the rendered cloud config: %v", err)
	}
	// No limit: no flag.
	b, _, _, _ = renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(nil)})
	if _, ok := b.Flag("max-hourly-cost"); ok {
		t.Error("--max-hourly-cost rendered with maxHourlyCost 0")
	}
	for _, tc := range []struct {
		name    string
		values  map[string]interface{}
		wantErr string
	}{
		{"not a slug", map[string]interface{}{"cloudConfig": map[string]interface{}{"priceOverrides": map[string]interface{}{"GPU x": 1}}},
			`cloudConfig.priceOverrides: "GPU x" is not a size slug`},
		{"a negative price", map[string]interface{}{"cloudConfig": map[string]interface{}{"priceOverrides": map[string]interface{}{"s-2vcpu-4gb": -1}}},
			"priceOverrides"},
		{"both spellings of the limit", map[string]interface{}{"maxHourlyCost": 3, "extraArgs": map[string]interface{}{"max-hourly-cost": 4}},
			"maxHourlyCost and extraArgs.max-hourly-cost are both set"},
	} {
		if _, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(tc.values)}); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// cloudConfig.maxNodeProvisionTimeBySize becomes cloud.json's
// max_node_provision_time_by_size, which the binary's builder accepts; a
// value that is no duration fails helm install naming the entry.
func TestChartProvisionTimesBySize(t *testing.T) {
	t.Parallel()
	values := withClusterID(map[string]interface{}{"cloudConfig": map[string]interface{}{
		"maxNodeProvisionTimeBySize": map[string]interface{}{"gpu-h100x1-80gb": "25m", "s-4vcpu-8gb": "1h30m"},
	}})
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.MaxNodeProvisionTimeBySize; got["gpu-h100x1-80gb"] != "25m" || got["s-4vcpu-8gb"] != "1h30m" {
		t.Errorf("max_node_provision_time_by_size = %v", got)
	}
	if err := buildProvider(t, cc, false); err != nil {
		t.Errorf("the binary refuses the rendered cloud config: %v", err)
	}
	for _, tc := range []struct {
		name string
		v    interface{}
	}{{"no unit", "25"}, {"zero", "0s"}, {"a number", 1500}, {"empty", ""}, {"days", "1d"}} {
		values := withClusterID(map[string]interface{}{"cloudConfig": map[string]interface{}{
			"maxNodeProvisionTimeBySize": map[string]interface{}{"gpu-h100x1-80gb": tc.v},
		}})
		_, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
		if err == nil || !strings.Contains(err.Error(), "maxNodeProvisionTimeBySize") {
			t.Errorf("%s (%v): err = %v, want one naming cloudConfig.maxNodeProvisionTimeBySize", tc.name, tc.v, err)
		}
	}
}
