package digitalocean

import (
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func TestClusterSettingsReplaceDefaults(t *testing.T) {
	defaults := config.Defaults().NodeGroupDefaults
	cases := []struct {
		name          string
		cfg           *godo.KubernetesClusterAutoscalerConfiguration
		given         map[string]bool
		wantThreshold float64
		wantUnneeded  time.Duration
		wantProblem   string
	}{
		{name: "cluster sets nothing", cfg: nil,
			wantThreshold: defaults.ScaleDownUtilizationThreshold, wantUnneeded: defaults.ScaleDownUnneededTime},
		{name: "both set, no flags given", cfg: &godo.KubernetesClusterAutoscalerConfiguration{
			ScaleDownUtilizationThreshold: godo.PtrTo(0.65), ScaleDownUnneededTime: godo.PtrTo("3m")},
			wantThreshold: 0.65, wantUnneeded: 3 * time.Minute},
		{name: "a flag given wins over the cluster", cfg: &godo.KubernetesClusterAutoscalerConfiguration{
			ScaleDownUtilizationThreshold: godo.PtrTo(0.65), ScaleDownUnneededTime: godo.PtrTo("3m")},
			given:         map[string]bool{flagUnneededTime: true},
			wantThreshold: 0.65, wantUnneeded: defaults.ScaleDownUnneededTime},
		{name: "threshold out of range ignored", cfg: &godo.KubernetesClusterAutoscalerConfiguration{
			ScaleDownUtilizationThreshold: godo.PtrTo(1.5)},
			wantThreshold: defaults.ScaleDownUtilizationThreshold, wantUnneeded: defaults.ScaleDownUnneededTime,
			wantProblem: "scale_down_utilization_threshold 1.5 is not in (0, 1]"},
		{name: "zero threshold ignored", cfg: &godo.KubernetesClusterAutoscalerConfiguration{
			ScaleDownUtilizationThreshold: godo.PtrTo(0.0)},
			wantThreshold: defaults.ScaleDownUtilizationThreshold, wantUnneeded: defaults.ScaleDownUnneededTime,
			wantProblem: "scale_down_utilization_threshold 0 is not in (0, 1]"},
		{name: "unneeded time not a duration", cfg: &godo.KubernetesClusterAutoscalerConfiguration{
			ScaleDownUnneededTime: godo.PtrTo("soon")},
			wantThreshold: defaults.ScaleDownUtilizationThreshold, wantUnneeded: defaults.ScaleDownUnneededTime,
			wantProblem: `scale_down_unneeded_time "soon" is not a duration`},
		{name: "negative unneeded time", cfg: &godo.KubernetesClusterAutoscalerConfiguration{
			ScaleDownUnneededTime: godo.PtrTo("-1m")},
			wantThreshold: defaults.ScaleDownUtilizationThreshold, wantUnneeded: defaults.ScaleDownUnneededTime,
			wantProblem: `scale_down_unneeded_time "-1m" is not positive`},
		{name: "empty unneeded time is unset", cfg: &godo.KubernetesClusterAutoscalerConfiguration{
			ScaleDownUnneededTime: godo.PtrTo("")},
			wantThreshold: defaults.ScaleDownUtilizationThreshold, wantUnneeded: defaults.ScaleDownUnneededTime},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := parseClusterSettings(tc.cfg)
			got := s.applyTo(defaults, tc.given)
			if got.ScaleDownUtilizationThreshold != tc.wantThreshold || got.ScaleDownUnneededTime != tc.wantUnneeded {
				t.Errorf("threshold %v, unneeded %v; want %v, %v", got.ScaleDownUtilizationThreshold, got.ScaleDownUnneededTime, tc.wantThreshold, tc.wantUnneeded)
			}
			if got.ScaleDownUnreadyTime != defaults.ScaleDownUnreadyTime || got.MaxNodeProvisionTime != defaults.MaxNodeProvisionTime {
				t.Error("options the cluster cannot set were changed")
			}
			problems := strings.Join(s.problems, "; ")
			if problems != tc.wantProblem {
				t.Errorf("problems %q, want %q", problems, tc.wantProblem)
			}
			if tc.wantProblem != "" && !strings.Contains(s.describe(tc.given), "ignored: "+tc.wantProblem) {
				t.Errorf("the log line %q does not say what was ignored", s.describe(tc.given))
			}
		})
	}
}

// The settings travel over the API: read at the first Refresh, again only
// after settingsTTL, kept when a read fails, and not read at all when every
// flag they could replace is given.
func TestClusterSettingsFromTheAPI(t *testing.T) {
	e := newEnv(t, doks.Options{})
	e.pool(autoscaled("a", 1, 0, 3))
	e.sim.SetClusterAutoscalerConfiguration(&godo.KubernetesClusterAutoscalerConfiguration{
		ScaleDownUtilizationThreshold: godo.PtrTo(0.65), ScaleDownUnneededTime: godo.PtrTo("3m"), Expanders: []string{"priority"}})
	defaults := config.Defaults().NodeGroupDefaults
	options := func() config.NodeGroupAutoscalingOptions {
		t.Helper()
		groups := e.p.NodeGroups()
		if len(groups) != 1 {
			t.Fatalf("%d node groups", len(groups))
		}
		o, err := groups[0].GetOptions(defaults)
		if err != nil {
			t.Fatal(err)
		}
		return *o
	}

	e.refresh()
	if o := options(); o.ScaleDownUtilizationThreshold != 0.65 || o.ScaleDownUnneededTime != 3*time.Minute {
		t.Fatalf("after the first Refresh: %+v, want the cluster's 0.65 and 3m", o)
	}
	if n := e.sim.RequestCount(doks.OpGetCluster); n != 1 {
		t.Fatalf("%d cluster reads, want 1", n)
	}

	// Changed in the cluster: seen once settingsTTL has passed, not before.
	e.sim.SetClusterAutoscalerConfiguration(&godo.KubernetesClusterAutoscalerConfiguration{ScaleDownUtilizationThreshold: godo.PtrTo(0.4)})
	e.refresh()
	if o := options(); o.ScaleDownUtilizationThreshold != 0.65 || e.sim.RequestCount(doks.OpGetCluster) != 1 {
		t.Fatalf("read again within settingsTTL: %+v", o)
	}
	e.advance(defaultClientOptions().settingsTTL)
	e.refresh()
	if o := options(); o.ScaleDownUtilizationThreshold != 0.4 || o.ScaleDownUnneededTime != defaults.ScaleDownUnneededTime {
		t.Fatalf("after settingsTTL: %+v, want 0.4 and the default unneeded time", o)
	}

	// A failed read keeps what was read last, does not fail the Refresh, and is tried
	// again only after settingsTTL: Refreshes in between make one request each.
	e.sim.InjectFault(doks.Fault{Operation: doks.OpGetCluster, Status: 404})
	e.advance(defaultClientOptions().settingsTTL)
	e.refresh()
	if o := options(); o.ScaleDownUtilizationThreshold != 0.4 {
		t.Fatalf("after a failed read: %+v, want the last settings kept", o)
	}
	reads, before := e.sim.RequestCount(doks.OpGetCluster), e.sim.TotalRequests()
	e.refresh()
	e.refresh()
	if got := e.sim.TotalRequests() - before; got != 2 || e.sim.RequestCount(doks.OpGetCluster) != reads {
		t.Errorf("two Refreshes after a failed read made %d requests (%d cluster reads), want 2 (none)", got, e.sim.RequestCount(doks.OpGetCluster)-reads)
	}
	e.sim.ClearFaults()
	e.sim.SetClusterAutoscalerConfiguration(&godo.KubernetesClusterAutoscalerConfiguration{ScaleDownUtilizationThreshold: godo.PtrTo(0.3)})
	e.advance(defaultClientOptions().settingsTTL)
	e.refresh()
	if o := options(); o.ScaleDownUtilizationThreshold != 0.3 {
		t.Fatalf("after the endpoint recovered: %+v, want 0.3", o)
	}
}

// With both flags given the settings cannot matter: the cluster is read
// once, for its region, and never again.
func TestClusterReadOnceWhenFlagsDecide(t *testing.T) {
	e := newEnv(t, doks.Options{}, func(_ *testEnv, _ *clientOptions, o *config.AutoscalingOptions) {
		o.FlagsGiven = map[string]bool{flagUtilizationThreshold: true, flagUnneededTime: true}
	})
	e.pool(autoscaled("a", 1, 0, 3))
	e.sim.SetClusterAutoscalerConfiguration(&godo.KubernetesClusterAutoscalerConfiguration{ScaleDownUtilizationThreshold: godo.PtrTo(0.65)})
	e.refresh()
	e.advance(defaultClientOptions().settingsTTL)
	e.refresh()
	if n := e.sim.RequestCount(doks.OpGetCluster); n != 1 {
		t.Errorf("%d cluster reads with both flags given, want 1 (the region)", n)
	}
	defaults := config.Defaults().NodeGroupDefaults
	if o, _ := e.p.NodeGroups()[0].GetOptions(defaults); *o != defaults {
		t.Errorf("options %+v, want the flags' values", *o)
	}
}
