package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// preflightResult is one line of `preflight -o json`.
type preflightResult struct {
	Check, Verdict, Detail, Fix string
}

// runPreflight runs `<binary> preflight args... -o json` and returns its
// lines, text form and exit code.
func (s *scenario) runPreflight(args ...string) (map[string]preflightResult, string, int) {
	s.t.Helper()
	start := time.Now()
	cmd := exec.Command(caBinary, append(append([]string{"preflight"}, args...), "-o", "json")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		s.t.Fatalf("preflight: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		s.t.Errorf("preflight took %v, want seconds", took)
	}
	var list []preflightResult
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		s.t.Fatalf("preflight -o json: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := map[string]preflightResult{}
	var text strings.Builder
	for _, r := range list {
		if _, dup := out[r.Check]; !dup {
			out[r.Check] = r
		}
		text.WriteString(r.Verdict + " " + r.Check + ": " + r.Detail + " | fix: " + r.Fix + "\n")
	}
	return out, text.String(), code
}

// expect checks a line's verdict and that its detail says each of says.
func (s *scenario) expect(lines map[string]preflightResult, text, check, verdict string, says ...string) {
	s.t.Helper()
	r, ok := lines[check]
	if !ok {
		s.t.Errorf("no line %s:\n%s", check, text)
		return
	}
	if r.Verdict != verdict {
		s.t.Errorf("%s: verdict %s, want %s (%s | fix: %s)", check, r.Verdict, verdict, r.Detail, r.Fix)
	}
	for _, w := range says {
		if !strings.Contains(r.Detail, w) {
			s.t.Errorf("%s: %q does not say %q", check, r.Detail, w)
		}
	}
}

// writeCloudConfig writes a cloud config from the sandbox's, changed by edit.
func (s *scenario) writeCloudConfig(name string, edit func(map[string]any)) string {
	s.t.Helper()
	raw, err := os.ReadFile(s.sb.CloudConfigPath)
	if err != nil {
		s.t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		s.t.Fatal(err)
	}
	edit(cfg)
	raw, _ = json.Marshal(cfg)
	p := filepath.Join(artifacts, s.ns, name)
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// TestPreflight runs `cluster-autoscaler preflight` against the sandbox, then
// breaks it one way at a time (DigitalOcean unreachable, a wrong cluster ID,
// a refused token, a token without tag:read, a Kubernetes identity without
// rights, an unreachable API server) and checks the line that names it and
// the exit code. Nothing is ever written, to DigitalOcean or Kubernetes.
func TestPreflight(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{
		{Name: "ours", Size: size, Count: 1, Tags: []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:4"}},
		{Name: "both", Size: size, Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 3, Tags: []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:3"}},
		autoscaled("dokss", 1, 1, 3),
	}})
	tags := s.writeCloudConfig("cloud-tags.json", func(c map[string]any) { c["node_pool_selection"] = "tags" })
	admin := []string{"--cloud-provider=digitalocean", "--cloud-config=" + tags, "--kubeconfig=" + s.sb.KubeconfigPath, "--namespace=" + s.ns}

	t.Run("healthy", func(t *testing.T) {
		lines, text, code := s.runPreflight(admin...)
		if code != 0 {
			t.Errorf("exit %d, want 0:\n%s", code, text)
		}
		s.expect(lines, text, "do-token", "ok", "accepted the token from token_file \""+s.sb.TokenPath+"\"")
		s.expect(lines, text, "do-cluster", "ok", s.sb.ClusterID, "region nyc1", "Kubernetes "+doks.VersionSlug)
		s.expect(lines, text, "do-scope-tag-read", "ok", "visible")
		s.expect(lines, text, "do-pool/ours", "ok", "is a node group by its tags, min 1, max 4")
		s.expect(lines, text, "do-pool/both", "warn", "conflict", "DOKS auto-scale on")
		s.expect(lines, text, "do-pool/dokss", "ok", "DOKS's managed autoscaler owns it")
		s.expect(lines, text, "kube-api", "ok", "v1.37")
		s.expect(lines, text, "kube-rbac", "ok", "access reviews allowed")
		s.expect(lines, text, "kube-namespace", "ok", s.ns)
		t.Logf("preflight, healthy:\n%s", text)
	})

	// The identity deploy/ gives the autoscaler, under deploy/'s RBAC only,
	// answered by the API server's RBAC authorizer: every review the check
	// derives from the same files is allowed (resource names, subresources
	// and the namespace included).
	t.Run("the deploy/ ServiceAccount", func(t *testing.T) {
		s.applyRBAC()
		kubeconfig, _ := s.serviceAccountKubeconfig()
		lines, text, code := s.runPreflight("--cloud-provider=digitalocean", "--cloud-config="+tags, "--kubeconfig="+kubeconfig, "--namespace="+rbacNamespace)
		if code != 0 {
			t.Errorf("exit %d, want 0:\n%s", code, text)
		}
		s.expect(lines, text, "kube-api", "ok", "as "+rbacUser)
		s.expect(lines, text, "kube-rbac", "ok", "access reviews allowed for "+rbacUser)
		if strings.Contains(text, "FAIL kube-rbac/") {
			t.Errorf("rights denied to the deploy/ ServiceAccount:\n%s", text)
		}
		s.expect(lines, text, "kube-namespace", "ok", rbacNamespace)
	})

	t.Run("auto_scale mode names the two autoscalers", func(t *testing.T) {
		args := append([]string{}, admin...)
		args[1] = "--cloud-config=" + s.sb.CloudConfigPath
		lines, text, code := s.runPreflight(args...)
		if code != 0 {
			t.Errorf("exit %d, want 0:\n%s", code, text)
		}
		s.expect(lines, text, "do-pool/dokss", "warn", "two autoscalers")
	})

	t.Run("DigitalOcean unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + l.Addr().String() + "/"
		l.Close()
		cc := s.writeCloudConfig("cloud-dead.json", func(c map[string]any) { c["url"] = dead })
		lines, text, code := s.runPreflight("--cloud-provider=digitalocean", "--cloud-config="+cc, "--kubeconfig="+s.sb.KubeconfigPath, "--namespace="+s.ns)
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, text)
		}
		s.expect(lines, text, "do-api", "FAIL", "cannot reach the DigitalOcean API at "+dead)
		// The Kubernetes side still reports.
		s.expect(lines, text, "kube-rbac", "ok")
	})

	t.Run("wrong cluster ID", func(t *testing.T) {
		cc := s.writeCloudConfig("cloud-other.json", func(c map[string]any) { c["cluster_id"] = "0badc0de-0000-4000-8000-000000000000" })
		lines, text, code := s.runPreflight("--cloud-provider=digitalocean", "--cloud-config="+cc, "--kubeconfig="+s.sb.KubeconfigPath, "--namespace="+s.ns)
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, text)
		}
		s.expect(lines, text, "do-cluster", "FAIL", "0badc0de-0000-4000-8000-000000000000", "404")
		if !strings.Contains(lines["do-cluster"].Fix, "doctl kubernetes cluster list") {
			t.Errorf("do-cluster fix %q does not name doctl kubernetes cluster list", lines["do-cluster"].Fix)
		}
	})

	token, err := os.ReadFile(s.sb.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	good := strings.TrimSpace(string(token))

	t.Run("refused token", func(t *testing.T) {
		bad := filepath.Join(artifacts, s.ns, "revoked-token")
		if err := os.WriteFile(bad, []byte("dop_v1_revoked0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cc := s.writeCloudConfig("cloud-revoked.json", func(c map[string]any) { c["token_file"] = bad })
		cmdArgs := []string{"--cloud-provider=digitalocean", "--cloud-config=" + cc, "--kubeconfig=" + s.sb.KubeconfigPath, "--namespace=" + s.ns}
		lines, text, code := s.runPreflight(cmdArgs...)
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, text)
		}
		s.expect(lines, text, "do-token", "FAIL", "401", "refused the token from token_file \""+bad+"\"")
		if strings.Contains(text, "dop_v1_revoked") || strings.Contains(text, good) {
			t.Errorf("the output shows a token:\n%s", text)
		}
	})

	t.Run("token without tag:read in tags mode", func(t *testing.T) {
		narrow := "dop_v1_narrow-" + s.ns
		s.sb.DOKS.SetTokens(good, narrow)
		s.sb.DOKS.SetTokenWithoutTagRead(narrow)
		defer s.sb.DOKS.SetTokens(good)
		cc := s.writeCloudConfig("cloud-narrow.json", func(c map[string]any) {
			delete(c, "token_file")
			c["token"] = narrow
			c["node_pool_selection"] = "tags"
		})
		lines, text, code := s.runPreflight("--cloud-provider=digitalocean", "--cloud-config="+cc, "--kubeconfig="+s.sb.KubeconfigPath, "--namespace="+s.ns)
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, text)
		}
		s.expect(lines, text, "do-scope-tag-read", "FAIL", "lacks tag:read")
		if strings.Contains(text, narrow) {
			t.Errorf("the output shows the token:\n%s", text)
		}
	})

	t.Run("Kubernetes identity without rights", func(t *testing.T) {
		const sa = "preflight-nobody"
		if _, err := s.kube.CoreV1().ServiceAccounts(s.ns).Create(s.ctx, &apiv1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := s.kube.CoreV1().ServiceAccounts(s.ns).CreateToken(s.ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig := s.kubeconfigWith("nobody.kubeconfig", func(a *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			*a = clientcmdapi.AuthInfo{Token: tr.Status.Token}
		})
		lines, text, code := s.runPreflight("--cloud-provider=digitalocean", "--cloud-config="+tags, "--kubeconfig="+kubeconfig, "--namespace="+s.ns)
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, text)
		}
		s.expect(lines, text, "kube-rbac/nodes", "FAIL", "system:serviceaccount:"+s.ns+":"+sa, "may not get, list, watch", "nodes cluster-wide")
		s.expect(lines, text, "kube-rbac", "FAIL")
		// The DigitalOcean side is unaffected.
		s.expect(lines, text, "do-pool/ours", "ok")
	})

	t.Run("Kubernetes API unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "https://" + l.Addr().String()
		l.Close()
		kubeconfig := s.kubeconfigWith("dead.kubeconfig", func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) { c.Server = dead })
		lines, text, code := s.runPreflight("--cloud-provider=digitalocean", "--cloud-config="+tags, "--kubeconfig="+kubeconfig, "--namespace="+s.ns)
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, text)
		}
		s.expect(lines, text, "kube-api", "FAIL", "cannot reach the Kubernetes API server at "+dead)
	})

	// Read only, whatever broke: no DigitalOcean write, no Lease, no status
	// ConfigMap.
	if ch := s.sb.DOKS.Changes(); len(ch) != 0 {
		t.Errorf("preflight wrote to DigitalOcean: %+v", ch)
	}
	if _, err := s.kube.CoordinationV1().Leases(s.ns).Get(s.ctx, leaseName, metav1.GetOptions{}); err == nil {
		t.Error("preflight created the Lease")
	}
	if _, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{}); err == nil {
		t.Error("preflight created the status ConfigMap")
	}
}

// kubeconfigWith writes a copy of the admin kubeconfig changed by edit.
func (s *scenario) kubeconfigWith(name string, edit func(*clientcmdapi.AuthInfo, *clientcmdapi.Cluster)) string {
	s.t.Helper()
	cfg, err := clientcmd.LoadFromFile(sharedCP.KubeconfigPath)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	edit(cfg.AuthInfos[ctx.AuthInfo], cfg.Clusters[ctx.Cluster])
	p := filepath.Join(artifacts, s.ns, name)
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		s.t.Fatal(err)
	}
	return p
}
