package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// tagsModeConfig writes a cloud config for this scenario's sandbox that picks
// node groups by their DOKS pool tags, and returns its path.
func (s *scenario) tagsModeConfig() string {
	s.t.Helper()
	raw, err := json.Marshal(map[string]string{
		"cluster_id": s.sb.ClusterID, "token_file": s.sb.TokenPath, "url": s.sb.DOKS.URL(),
		"node_pool_selection": "tags",
	})
	if err != nil {
		s.t.Fatal(err)
	}
	path := filepath.Join(artifacts, s.ns, "cloud-tags.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// In tags mode DOKS does not hold a pool at its minimum: a tagged pool with 1
// node and a min tag of 3 is raised to 3 with --enforce-node-group-min-size,
// with no pod pending, and left at 1 without it (upstream's default).
func TestEnforceNodeGroupMinSizeOn(t *testing.T) {
	s := belowMinTaggedPool(t, "--enforce-node-group-min-size=true")
	s.waitTarget("tagged", 3, 60*time.Second)
	s.waitNodes("tagged", 3, 60*time.Second)
	s.holds("the pool staying at its min", 5*time.Second, s.targetIs("tagged", 3))
	if m := s.maxTarget("tagged"); m != 3 {
		t.Errorf("pool tagged reached %d nodes, want 3", m)
	}
}

func TestEnforceNodeGroupMinSizeOff(t *testing.T) {
	s := belowMinTaggedPool(t, "--enforce-node-group-min-size=false")
	s.holds("the pool left below its min", 15*time.Second, s.targetIs("tagged", 1))
}

// belowMinTaggedPool runs the autoscaler in tags mode, with flag, on one
// tagged pool of 1 node whose tags say min 3, max 5.
func belowMinTaggedPool(t *testing.T, flag string) *scenario {
	tags := []string{"k8s", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:3", "k8s-cluster-autoscaler-max:5"}
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{{Name: "tagged", Size: size, Count: 1, Tags: tags}}})
	ca := s.startAutoscaler("--cloud-config="+s.tagsModeConfig(), flag)
	// The pool must be a node group for either outcome to mean anything.
	note := "node pool tagged (" + s.pool("tagged").ID + ") is a node group by its tags: min 3, max 5"
	s.eventually("the tagged pool taken as a node group", 60*time.Second, func() error {
		if !strings.Contains(strings.Join(logLines(ca.LogPath, note), "\n"), note) {
			return fmt.Errorf("no log line %q yet", note)
		}
		return nil
	})
	return s
}
