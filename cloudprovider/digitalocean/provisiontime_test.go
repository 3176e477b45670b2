package digitalocean

import (
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// max_node_provision_time_by_size is validated before anything starts;
// every error names the field and the entry.
func TestProvisionTimesAreValidated(t *testing.T) {
	cases := []struct{ name, json, wantErr string }{
		{"valid", `"max_node_provision_time_by_size": {"gpu-h100x1-80gb": "25m", "s-2vcpu-4gb": "90s"}`, ""},
		{"not a duration", `"max_node_provision_time_by_size": {"gpu-h100x1-80gb": "25"}`, `max_node_provision_time_by_size["gpu-h100x1-80gb"]: "25" is not a provision time`},
		{"zero", `"max_node_provision_time_by_size": {"gpu-h100x1-80gb": "0s"}`, `max_node_provision_time_by_size["gpu-h100x1-80gb"]: "0s" is not a provision time`},
		{"negative", `"max_node_provision_time_by_size": {"gpu-h100x1-80gb": "-5m"}`, `"-5m" is not a provision time`},
		{"over a day", `"max_node_provision_time_by_size": {"gpu-h100x1-80gb": "25h"}`, `"25h" is not a provision time`},
		{"not a slug", `"max_node_provision_time_by_size": {"GPU H100": "25m"}`, `max_node_provision_time_by_size: "GPU H100" is not a size slug`},
		{"a number", `"max_node_provision_time_by_size": {"gpu-h100x1-80gb": 1500}`, "max_node_provision_time_by_size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseConfig([]byte(cfgHead + ", " + c.json + "}"))
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if got := cfg.provisionTimes["gpu-h100x1-80gb"]; got != 25*time.Minute {
					t.Fatalf("gpu-h100x1-80gb: %v, want 25m", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

// A pool of a size listed in max_node_provision_time_by_size, existing or
// planned (a pool on demand), gets that provision time; pools of other
// sizes keep --max-node-provision-time.
func TestProvisionTimeBySize(t *testing.T) {
	e := newEnv(t, doks.Options{Region: "tor1"}, withAutoprovisioning(napSection),
		withCloudConfig(`"max_node_provision_time_by_size": {"s-2vcpu-4gb": "3m", "gpu-h100x1-80gb": "25m"}`))
	listed := e.pool(autoscaled("listed", 1, 0, 3)) // s-2vcpu-4gb
	other := autoscaled("other", 1, 0, 3)
	other.Size = "s-4vcpu-8gb"
	op := e.pool(other)
	e.refresh()
	defaults := config.Defaults().NodeGroupDefaults
	planned, err := e.p.NewNodeGroup("gpu-h100x1-80gb", nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		group interface {
			GetOptions(config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error)
		}
		want time.Duration
	}{
		{"listed size", e.group(listed.ID), 3 * time.Minute},
		{"size not listed", e.group(op.ID), defaults.MaxNodeProvisionTime},
		{"planned pool of a listed size", planned, 25 * time.Minute},
	} {
		o, err := tc.group.GetOptions(defaults)
		if err != nil {
			t.Fatal(err)
		}
		if o.MaxNodeProvisionTime != tc.want {
			t.Errorf("%s: MaxNodeProvisionTime %v, want %v", tc.name, o.MaxNodeProvisionTime, tc.want)
		}
	}
}
