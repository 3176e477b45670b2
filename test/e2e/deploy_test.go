package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/manifestcheck"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// shipped is what an installation gives the binary: the Deployment's args and
// the cloud config Secret's cloud.json.
type shipped struct {
	args      []string
	cloudJSON string
}

func shippedFrom(t *testing.T, objs []runtime.Object) shipped {
	t.Helper()
	var out shipped
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.Deployment:
			c := v.Spec.Template.Spec.Containers[0]
			out.args = append(append([]string(nil), c.Command...), c.Args...)
		case *apiv1.Secret:
			if cj, ok := v.StringData["cloud.json"]; ok {
				out.cloudJSON = cj
			} else if cj, ok := v.Data["cloud.json"]; ok {
				out.cloudJSON = string(cj)
			}
		}
	}
	if len(out.args) == 0 || out.cloudJSON == "" {
		t.Fatalf("no Deployment args or cloud.json among %d objects", len(objs))
	}
	return out
}

// deployManifests are deploy/'s objects, as `kubectl apply -k deploy/` creates them.
func deployManifests(t *testing.T) shipped {
	t.Helper()
	objs, err := manifestcheck.Objects()
	if err != nil {
		t.Fatal(err)
	}
	return shippedFrom(t, objs)
}

// chartRendered are the Helm chart's objects rendered by helm itself with
// the cluster ID and the given values file (none: the chart's defaults); the
// test is skipped without helm.
func chartRendered(t *testing.T, clusterID, valuesYAML string) shipped {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		if h, err := exec.LookPath("helm"); err == nil {
			helm = h
		} else if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			if h := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm"); fileExists(h) {
				helm = h
			}
		}
	}
	if helm == "" {
		t.Skip("helm not found (go install helm.sh/helm/v4/cmd/helm@v4.3.2)")
	}
	home := t.TempDir()
	args := []string{"template", "cluster-autoscaler", filepath.Join(repoRoot(), "charts", "cluster-autoscaler-digitalocean"),
		"--namespace", rbacNamespace, "--set", "cloudConfig.clusterID=" + clusterID}
	if valuesYAML != "" {
		f := filepath.Join(home, "values.yaml")
		if err := os.WriteFile(f, []byte(valuesYAML), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v: %s", err, stderr.String())
	}
	var objs []runtime.Object
	for _, doc := range strings.Split(stdout.String(), "\n---") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil || tm.Kind == "" || strings.HasPrefix(tm.APIVersion, "monitoring.coreos.com/") {
			continue
		}
		o, err := manifestcheck.Decode([]byte(doc))
		if err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		objs = append(objs, o...)
	}
	return shippedFrom(t, objs)
}

// errorLines are the klog error lines (E...) of a log containing substr:
// problems the operator should fix.
func errorLines(path, substr string) []string {
	var out []string
	for _, l := range logLines(path, substr) {
		if strings.HasPrefix(l, "E") {
			out = append(out, l)
		}
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// run starts the binary with the shipped args unchanged, its cloud.json
// pointed at the sandbox (cluster_id, token_file, url; every other field, such
// as node_pool_selection, as shipped) and, after them, only what a test run
// needs: the sandbox's kubeconfig, a free port, fast loops.
func (s *scenario) runShipped(sh shipped) *autoscaler {
	s.t.Helper()
	cc := map[string]interface{}{}
	if err := json.Unmarshal([]byte(sh.cloudJSON), &cc); err != nil {
		s.t.Fatalf("shipped cloud.json: %v", err)
	}
	cc["cluster_id"], cc["token_file"], cc["url"] = s.sb.ClusterID, s.sb.TokenPath, s.sb.DOKS.URL()
	raw, _ := json.Marshal(cc)
	path := filepath.Join(artifacts, s.ns, fmt.Sprintf("shipped-cloud-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		s.t.Fatal(err)
	}
	var args []string
	for _, a := range sh.args {
		if strings.HasPrefix(a, "--cloud-config=") {
			a = "--cloud-config=" + path
		}
		args = append(args, a)
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = args[1:] // the image's command, if the manifest names it
	}
	args = append(args, "--kubeconfig="+s.sb.KubeconfigPath, "--address=127.0.0.1:"+strconv.Itoa(freePort(s.t)),
		"--scan-interval=1s", "--new-pod-scale-up-delay=0s",
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
	return s.startAutoscalerArgs(args)
}

// statusGroups are the node groups (pool IDs) the status ConfigMap in kube-system lists.
func (s *scenario) statusGroups() ([]string, error) {
	cm, err := s.kube.CoreV1().ConfigMaps(rbacNamespace).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var st api.ClusterAutoscalerStatus
	if err := yaml.Unmarshal([]byte(cm.Data["status"]), &st); err != nil {
		return nil, err
	}
	var ids []string
	for _, g := range st.NodeGroups {
		ids = append(ids, g.Name)
	}
	return ids, nil
}

// waitStatusListsOnly waits until the status ConfigMap lists the named pool
// as the only node group.
func (s *scenario) waitStatusListsOnly(pool string) {
	s.t.Helper()
	id := s.pool(pool).ID
	s.eventually("the status ConfigMap listing only the "+pool+" pool", 60*time.Second, func() error {
		ids, err := s.statusGroups()
		if err != nil {
			return err
		}
		if fmt.Sprint(ids) != fmt.Sprint([]string{id}) {
			return fmt.Errorf("node groups %v, want only %s (%s)", ids, id, pool)
		}
		return nil
	})
}

// startShipped clears what an earlier run left in kube-system and runs the
// shipped manifests (runShipped), stopped when the test ends.
func (s *scenario) startShipped(sh shipped) *autoscaler {
	s.t.Helper()
	s.clearAutoscalerState()
	ca := s.runShipped(sh)
	s.t.Cleanup(func() { ca.Stop(15 * time.Second) })
	return ca
}

// deployPools returns one pool handed to this autoscaler (auto-scale off, tagged),
// one that carries the tags but has auto-scale on (DOKS's managed autoscaler
// owns it), and one plain DOKS-autoscaled pool.
func deployPools() []doks.PoolSpec {
	tags := []string{"k8s", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:3"}
	both := autoscaled("both", 1, 1, 3)
	both.Tags = tags
	return []doks.PoolSpec{
		{Name: "tagged", Size: size, Count: 1, Tags: tags},
		both,
		autoscaled("managed", 1, 1, 3),
	}
}

// The shipped deploy/ manifests, as they are (only the cluster's coordinates
// filled in), run the binary in tags mode: the tagged pool with auto-scale off
// is the only node group and grows for pending pods; the pools DOKS's managed
// autoscaler owns are never touched, and the one that also carries the tags is
// reported in a warning.
func TestDeployManifestsScaleTaggedPoolsOnly(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: deployPools()})
	ca := s.startShipped(deployManifests(t))

	tagged, both, managed := s.pool("tagged"), s.pool("both"), s.pool("managed")
	s.waitStatusListsOnly("tagged")

	// Five pods that need a node each: three fit the pools' first nodes,
	// and only the tagged pool may grow for the other two.
	s.deploy("web", 5, bigPod)
	s.waitTarget("tagged", 3, 60*time.Second)
	s.waitRunning("web", 5, 60*time.Second)
	for _, p := range []string{"both", "managed"} {
		if m := s.maxTarget(p); m != 1 {
			t.Errorf("pool %s, owned by DOKS's managed autoscaler, reached %d nodes", p, m)
		}
	}

	// Problems are logged as error lines once per change of the pool (at
	// --v=4 the same note is repeated every loop as an info line).
	if got := errorLines(ca.LogPath, "node pool both ("+both.ID+") carries tags"); len(got) != 1 ||
		!strings.Contains(got[0], "has auto_scale on: DOKS's managed autoscaler owns it, so it is not a node group") {
		t.Errorf("want one warning that pool both (auto-scale on, tagged) is left to DOKS, got %q", got)
	}
	if got := errorLines(ca.LogPath, "node pool managed ("+managed.ID+") has auto_scale on"); len(got) != 1 {
		t.Errorf("want one warning saying pool managed is left to DOKS, got %q", got)
	}
	if got := logLines(ca.LogPath, "node pool tagged ("+tagged.ID+") is a node group by its tags: min 1, max 3"); len(got) == 0 {
		t.Errorf("want one line saying pool tagged is a node group by its tags, got %q", got)
	}
}

// The Helm chart rendered by helm with its defaults gives the binary args it
// accepts and the same tags mode.
func TestChartDefaultsRunInTagsMode(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: deployPools()})
	sh := chartRendered(t, s.sb.ClusterID, "")
	s.startShipped(sh)
	s.waitStatusListsOnly("tagged")
}

// An upstream chart user's extraArgs, in upstream's forms (its default
// logtostderr/stderrthreshold, a bare flag, a repeated flag), rendered by helm:
// the binary accepts the args and runs.
func TestChartUpstreamStyleExtraArgsRun(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: deployPools()})
	sh := chartRendered(t, s.sb.ClusterID, `
extraArgs:
  logtostderr: true
  stderrthreshold: info
  v: 4
  expander: least-waste
  scale-down-enabled: null
  skip-nodes-with-local-storage: false
  startup-taint_1: node.cilium.io/agent-not-ready
  startup-taint_2: example.com/booting
`)
	for _, want := range []string{"--scale-down-enabled", "--startup-taint=node.cilium.io/agent-not-ready", "--startup-taint=example.com/booting", "--stderrthreshold=info"} {
		found := false
		for _, a := range sh.args {
			found = found || a == want
		}
		if !found {
			t.Fatalf("helm rendered args %v without %s", sh.args, want)
		}
	}
	s.startShipped(sh)
	s.waitStatusListsOnly("tagged")
}
