package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// The cloud config as the seed and upstream's README write it (a literal
// token, url ending in /v2) with the seed's start-up flags scales a pool:
// every request reaches a path DigitalOcean serves. Only --kubeconfig (the
// binary runs outside the cluster), --namespace (this test's own) and
// --address (a free port) differ from the seed's command line.
func TestSeedCloudConfigWithV2URLScalesUp(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("seed", 1, 1, 4)}})
	token, err := os.ReadFile(s.sb.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.MarshalIndent(map[string]string{
		"cluster_id": s.sb.ClusterID,
		"token":      strings.TrimSpace(string(token)),
		"url":        strings.TrimSuffix(s.sb.DOKS.URL(), "/") + "/v2",
	}, "", "  ")
	path := filepath.Join(artifacts, s.ns, "seed-cloud.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	ca := s.startAutoscalerArgs([]string{
		"--cloud-provider=digitalocean",
		"--cloud-config=" + path,
		"--namespace=" + s.ns,
		"--v=4",
		"--kubeconfig=" + s.sb.KubeconfigPath,
		"--address=127.0.0.1:" + strconv.Itoa(freePort(t)),
	})
	s.deploy("web", 3, bigPod, withNodeSelector(nodeagent.LabelNodePool, "seed"))
	s.waitTarget("seed", 3, 2*time.Minute)
	s.waitRunning("web", 3, 2*time.Minute)
	if n := s.sb.DOKS.RequestCount(doks.OpUnknown); n != 0 {
		t.Errorf("%d requests went to paths DigitalOcean does not serve", n)
	}
	if n := s.metric(ca, "cluster_autoscaler_digitalocean_api_requests_total", map[string]string{"code": "404"}); n != 0 {
		t.Errorf("digitalocean_api_requests_total{code=404} = %v, want 0", n)
	}
}
