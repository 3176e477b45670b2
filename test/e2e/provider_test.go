package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	"golang.org/x/oauth2"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// atomicWriterDir lays out a token the way the kubelet mounts a Secret:
// dir/token → ..data/token, ..data → ..<timestamp>/ (an atomic writer
// directory). rotate swaps ..data to a new timestamped directory with a
// rename, as the kubelet does when the Secret changes.
type atomicWriterDir struct {
	t   *testing.T
	dir string
	gen int
}

func newAtomicWriterDir(t *testing.T, dir, token string) *atomicWriterDir {
	a := &atomicWriterDir{t: t, dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	a.rotate(token)
	if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *atomicWriterDir) path() string { return filepath.Join(a.dir, "token") }

func (a *atomicWriterDir) rotate(token string) {
	a.t.Helper()
	a.gen++
	ts := fmt.Sprintf("..2026_12_03_16_00_%02d.%d", a.gen, os.Getpid())
	if err := os.Mkdir(filepath.Join(a.dir, ts), 0o700); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.dir, ts, "token"), []byte(token+"\n"), 0o600); err != nil {
		a.t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(a.dir, "..data"))
	tmp := filepath.Join(a.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		a.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(a.dir, "..data")); err != nil {
		a.t.Fatal(err)
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(a.dir, old))
	}
}

// A token rotated in its mounted Secret (the kubelet's ..data symlink swap)
// is used without a restart; the old token, revoked, is refused by the API.
func TestTokenRotationInMountedSecret(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("rot", 1, 1, 6)}})
	oldToken, err := os.ReadFile(s.sb.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSpace(string(oldToken))
	secret := newAtomicWriterDir(t, filepath.Join(artifacts, s.ns, "secret"), old)
	cfg, _ := json.Marshal(map[string]string{"cluster_id": s.sb.ClusterID, "token_file": secret.path(), "url": s.sb.DOKS.URL()})
	cfgPath := filepath.Join(artifacts, s.ns, "rotating-cloud.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	ca := s.startAutoscaler("--cloud-config="+cfgPath, "--scale-down-enabled=false")
	s.deploy("web", 2, bigPod, withNodeSelector(nodeagent.LabelNodePool, "rot"))
	s.waitTarget("rot", 2, 90*time.Second)

	// Rotate: a new token is created (both valid), the Secret is updated,
	// the old token is revoked.
	const newToken = "rotated-token-0123456789"
	s.sb.DOKS.SetTokens(old, newToken)
	secret.rotate(newToken)
	s.sb.DOKS.SetTokens(newToken)
	if got := listWith(t, s, old); got != http.StatusUnauthorized {
		t.Fatalf("the simulator answered %d to the revoked token, want 401", got)
	}
	unauthorizedBefore := s.metric(ca, "cluster_autoscaler_digitalocean_api_requests_total", map[string]string{"code": "401"})

	s.scaleDeployment("web", 4)
	s.waitTarget("rot", 4, 90*time.Second)
	s.waitRunning("web", 4, 90*time.Second)
	if ca.Cmd.ProcessState != nil {
		t.Fatal("the autoscaler exited")
	}
	if n := s.metric(ca, "cluster_autoscaler_digitalocean_api_requests_total", map[string]string{"code": "401"}); n != unauthorizedBefore {
		t.Errorf("%v requests refused as unauthorized after the rotation", n-unauthorizedBefore)
	}
	if log := tail(ca.LogPath, 100000); !strings.Contains(log, "token file") || !strings.Contains(log, "changed: using the new token") {
		t.Error("the log does not say the token file changed")
	} else if strings.Contains(log, newToken) || strings.Contains(log, old) {
		t.Error("the log carries a token")
	}
}

// listWith lists the pools with the given token and returns the status.
func listWith(t *testing.T, s *scenario, token string) int {
	c, err := godo.New(oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token})), godo.SetBaseURL(s.sb.DOKS.URL()))
	if err != nil {
		t.Fatal(err)
	}
	_, resp, _ := c.Kubernetes.ListNodePools(context.Background(), s.sb.ClusterID, nil)
	if resp == nil {
		t.Fatal("no answer from the simulator")
	}
	return resp.StatusCode
}

// A new leader's start-up taint clean-up leaves the deletion taint on a
// node DigitalOcean is deleting (pods placed there would be killed without
// a drain) and removes it from a node that is running.
func TestStartupKeepsTaintOfNodeBeingDeleted(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("keep", 2, 2, 3)}})
	s.waitNodes("keep", 2, 60*time.Second)
	nodes, err := s.kube.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{LabelSelector: nodeagent.LabelNodePool + "=keep"})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes %v %v", nodes, err)
	}
	leaving, staying := nodes.Items[0], nodes.Items[1]
	for _, n := range []apiv1.Node{leaving, staying} {
		n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: ToBeDeletedTaint, Value: strconv.FormatInt(time.Now().Unix(), 10), Effect: apiv1.TaintEffectNoSchedule})
		if _, err := s.kube.CoreV1().Nodes().Update(s.ctx, &n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The earlier leader's DeleteNode reached DigitalOcean: the node is deleting.
	pool := s.pool("keep")
	if err := s.sb.DOKS.SetNodeState(pool.ID, leaving.Labels[nodeagent.LabelNodeID], doks.StateDeleting, ""); err != nil {
		t.Fatal(err)
	}
	ca := s.startAutoscaler("--scale-down-enabled=false")
	tainted := func(name string) bool {
		for _, n := range s.taintedNodes() {
			if n == name {
				return true
			}
		}
		return false
	}
	s.eventually("the stale taint removed from "+staying.Name, 90*time.Second, func() error {
		if tainted(staying.Name) {
			return fmt.Errorf("still tainted")
		}
		return nil
	})
	s.holds("the taint on "+leaving.Name, 3*time.Second, func() error {
		if !tainted(leaving.Name) {
			return fmt.Errorf("the taint was removed from a node DigitalOcean is deleting")
		}
		return nil
	})
	if log := tail(ca.LogPath, 100000); !strings.Contains(log, `"Start-up: keeping the autoscaler taint: the node's instance is being deleted or gone" node="`+leaving.Name+`"`) {
		t.Error("the log does not say why the taint stays")
	}
}
