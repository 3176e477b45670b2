package simulator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

func schedulerConfigFile(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// --scheduler-config-file: the simulation filters as the cluster's
// scheduler profile says, as upstream builds its framework from the file.
func TestSchedulerProfileChangesTheSimulation(t *testing.T) {
	tainted := Node("tainted", 2000, 4*GiB)
	tainted.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "x", Effect: apiv1.TaintEffectNoSchedule}}
	plain := Node("plain", 2000, 4*GiB)
	zoned := Node("zoned", 2000, 4*GiB)
	zoned.Labels["pool-class"] = "general"
	s := snapshotOf(t, []*apiv1.Node{tainted, plain, zoned}, nil)
	pod := Pod("p", 100, GiB)

	cases := []struct {
		name string
		yaml string // "" for the default profile
		fits map[string]bool
	}{
		{name: "default profile", fits: map[string]bool{"tainted": false, "plain": true, "zoned": true}},
		{name: "TaintToleration disabled at Filter", yaml: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    filter:
      disabled:
      - name: TaintToleration
`, fits: map[string]bool{"tainted": true, "plain": true, "zoned": true}},
		{name: "NodeAffinity addedAffinity", yaml: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - key: pool-class
              operator: In
              values: [general]
`, fits: map[string]bool{"tainted": false, "plain": false, "zoned": true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []CheckerOption
			if tc.yaml != "" {
				profile, err := LoadSchedulerProfile(schedulerConfigFile(t, tc.yaml))
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, WithSchedulerProfile(profile))
			}
			c, err := NewPredicateChecker(opts...)
			if err != nil {
				t.Fatal(err)
			}
			for node, want := range tc.fits {
				if got := c.CheckPredicates(s, pod, node) == nil; got != want {
					t.Errorf("pod fits %s = %v, want %v", node, got, want)
				}
			}
		})
	}
}

func TestLoadSchedulerProfileRefusesBadFiles(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"two profiles", `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: other
`, "expected exactly one profile, found 2"},
		{"not a scheduler configuration", "apiVersion: v1\nkind: ConfigMap\n", "decoding the scheduler configuration"},
		{"invalid plugin arguments", `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: Sometimes
`, "invalid scheduler configuration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadSchedulerProfile(schedulerConfigFile(t, tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := LoadSchedulerProfile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing file was accepted")
	}
}
