package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/manifestcheck"
)

// buildProvider gives cloud.json to the binary's own provider builder, as the
// pod would at start-up, with the token file pointed at a real file.
func buildProvider(t *testing.T, cc manifestcheck.CloudConfig, autoprovisioning bool) error {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("dop_v1_test"), 0o600); err != nil {
		t.Fatal(err)
	}
	cc.TokenFile = token
	raw, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cloud.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = digitalocean.BuildDigitalOcean(config.AutoscalingOptions{CloudConfig: path, NodeAutoprovisioningEnabled: autoprovisioning}, nil)
	return err
}

func intp(n int) *int { return &n }

// cloudConfig.autoprovisioning becomes cloud.json's autoprovisioning section,
// checked at helm install as the binary checks it; the binary accepts what
// the chart renders and refuses what the chart refuses.
func TestChartAutoprovisioning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		section map[string]interface{} // cloudConfig.autoprovisioning
		want    *manifestcheck.Autoprovisioning
		wantErr string
		// binary is the section as cloud.json would carry it, for the
		// mistakes the binary must refuse too (nil: a chart-only check).
		binary *manifestcheck.Autoprovisioning
	}{
		{name: "every field",
			section: map[string]interface{}{"sizes": []interface{}{"s-*", "gpu-h100x1-80gb"}, "maxNodesPerPool": 20, "namePrefix": "pool-",
				"taintKeys": []interface{}{"dedicated", "example.com/team"}},
			want: &manifestcheck.Autoprovisioning{Sizes: []string{"s-*", "gpu-h100x1-80gb"}, MaxNodesPerPool: intp(20), NamePrefix: "pool-",
				TaintKeys: []string{"dedicated", "example.com/team"}}},
		{name: "sizes only", section: map[string]interface{}{"sizes": []interface{}{"c-?"}},
			want: &manifestcheck.Autoprovisioning{Sizes: []string{"c-?"}}},
		{name: "no sizes", section: map[string]interface{}{"maxNodesPerPool": 3},
			wantErr: "cloudConfig.autoprovisioning.sizes is empty",
			binary:  &manifestcheck.Autoprovisioning{MaxNodesPerPool: intp(3)}},
		{name: "upper-case size", section: map[string]interface{}{"sizes": []interface{}{"s-*", "S-2VCPU"}},
			wantErr: `cloudConfig.autoprovisioning.sizes[1] "S-2VCPU" is not a size slug or pattern`,
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*", "S-2VCPU"}}},
		{name: "size twice", section: map[string]interface{}{"sizes": []interface{}{"s-*", "s-*"}},
			wantErr: "lists a size twice", binary: &manifestcheck.Autoprovisioning{Sizes: []string{"s-*", "s-*"}}},
		{name: "max 0", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "maxNodesPerPool": 0},
			wantErr: "cloudConfig.autoprovisioning.maxNodesPerPool 0 is not between 1 and 1000",
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, MaxNodesPerPool: intp(0)}},
		{name: "max 1001", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "maxNodesPerPool": 1001},
			wantErr: "maxNodesPerPool 1001 is not between 1 and 1000",
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, MaxNodesPerPool: intp(1001)}},
		{name: "max not a number", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "maxNodesPerPool": "ten"},
			wantErr: "maxNodesPerPool"},
		{name: "prefix upper-case", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "namePrefix": "Ca-"},
			wantErr: `cloudConfig.autoprovisioning.namePrefix "Ca-" is not valid`,
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, NamePrefix: "Ca-"}},
		{name: "prefix too long", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "namePrefix": strings.Repeat("a", 21)},
			wantErr: "namePrefix", binary: &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, NamePrefix: strings.Repeat("a", 21)}},
		{name: "kubernetes.io taint", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "taintKeys": []interface{}{"node.kubernetes.io/unschedulable"}},
			wantErr: `taintKeys[0] "node.kubernetes.io/unschedulable" is in the kubernetes.io namespace`,
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, TaintKeys: []string{"node.kubernetes.io/unschedulable"}}},
		{name: "GPU taint", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "taintKeys": []interface{}{"nvidia.com/gpu"}},
			wantErr: "is a taint the autoscaler or DOKS sets itself",
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, TaintKeys: []string{"nvidia.com/gpu"}}},
		{name: "autoscaler taint", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "taintKeys": []interface{}{"ToBeDeletedByClusterAutoscaler"}},
			wantErr: "is a taint the autoscaler or DOKS sets itself",
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, TaintKeys: []string{"ToBeDeletedByClusterAutoscaler"}}},
		{name: "invalid taint key", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "taintKeys": []interface{}{"bad key!"}},
			wantErr: `taintKeys[0] "bad key!" is not a valid taint key`,
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, TaintKeys: []string{"bad key!"}}},
		{name: "taint key twice", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "taintKeys": []interface{}{"a", "a"}},
			wantErr: "lists a key twice", binary: &manifestcheck.Autoprovisioning{Sizes: []string{"s-*"}, TaintKeys: []string{"a", "a"}}},
		{name: "size preference", section: map[string]interface{}{"sizes": []interface{}{"gpu-*"}, "sizePreference": []interface{}{"gpu-h100x1-80gb", "gpu-l40sx1-48gb"}},
			want: &manifestcheck.Autoprovisioning{Sizes: []string{"gpu-*"}, SizePreference: []string{"gpu-h100x1-80gb", "gpu-l40sx1-48gb"}}},
		{name: "size preference with a wildcard", section: map[string]interface{}{"sizes": []interface{}{"gpu-*"}, "sizePreference": []interface{}{"gpu-*"}},
			wantErr: `cloudConfig.autoprovisioning.sizePreference[0] "gpu-*" is not a size slug`,
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"gpu-*"}, SizePreference: []string{"gpu-*"}}},
		{name: "size preference twice", section: map[string]interface{}{"sizes": []interface{}{"gpu-*"}, "sizePreference": []interface{}{"gpu-h100x1-80gb", "gpu-h100x1-80gb"}},
			wantErr: "sizePreference [gpu-h100x1-80gb gpu-h100x1-80gb] lists a size twice",
			binary:  &manifestcheck.Autoprovisioning{Sizes: []string{"gpu-*"}, SizePreference: []string{"gpu-h100x1-80gb", "gpu-h100x1-80gb"}}},
		{name: "size preference empty", section: map[string]interface{}{"sizes": []interface{}{"gpu-*"}, "sizePreference": []interface{}{}},
			wantErr: "cloudConfig.autoprovisioning.sizePreference is empty"},
		{name: "cloud.json spelling", section: map[string]interface{}{"sizes": []interface{}{"s-*"}, "max_nodes_per_pool": 3},
			wantErr: "max_nodes_per_pool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			values := withClusterID(map[string]interface{}{
				"cloudConfig": map[string]interface{}{"autoprovisioning": tc.section},
				"extraArgs":   map[string]interface{}{"node-autoprovisioning-enabled": true},
			})
			rel := release{name: "cluster-autoscaler", namespace: "kube-system", values: values}
			if tc.wantErr != "" {
				if _, err := render(t, rel); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("helm install: err = %v, want %q", err, tc.wantErr)
				}
				if tc.binary != nil {
					cc := manifestcheck.CloudConfig{ClusterID: testClusterID, Autoprovisioning: tc.binary}
					if err := buildProvider(t, cc, true); err == nil {
						t.Errorf("the binary accepts what the chart refuses: %+v", tc.binary)
					}
				}
				return
			}
			b, _, _, _ := renderBundle(t, rel)
			cc, err := b.ParseCloudConfig()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cc.Autoprovisioning, tc.want) {
				t.Errorf("cloud.json autoprovisioning = %+v, want %+v", cc.Autoprovisioning, tc.want)
			}
			if v, ok := b.Flag("node-autoprovisioning-enabled"); !ok || v != "true" {
				t.Errorf("--node-autoprovisioning-enabled = %q (present %v)", v, ok)
			}
			if err := buildProvider(t, cc, true); err != nil {
				t.Errorf("the binary refuses the rendered cloud config: %v", err)
			}
		})
	}
}

// The flag without the section would stop the binary at start-up; the chart
// refuses it at install, in either spelling and as a bare flag.
func TestChartAutoprovisioningFlagNeedsSection(t *testing.T) {
	t.Parallel()
	for _, args := range []map[string]interface{}{
		{"node-autoprovisioning-enabled": true},
		{"node_autoprovisioning_enabled": "true"},
		{"node-autoprovisioning-enabled": nil},
	} {
		values := withClusterID(map[string]interface{}{"extraArgs": args})
		_, err := render(t, release{name: "ca", namespace: "kube-system", values: values})
		if err == nil || !strings.Contains(err.Error(), "node autoprovisioning needs cloudConfig.autoprovisioning") {
			t.Errorf("extraArgs %v: err = %v, want the flag refused without the section", args, err)
		}
	}
	// Off, or not given: no section needed, and none rendered.
	for _, args := range []map[string]interface{}{{"node-autoprovisioning-enabled": false}, {}} {
		b, _, _, _ := renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{"extraArgs": args})})
		if cc, err := b.ParseCloudConfig(); err != nil || cc.Autoprovisioning != nil {
			t.Errorf("extraArgs %v: cloud.json %+v, %v", args, cc, err)
		}
	}
}
