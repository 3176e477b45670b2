package charts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

const chartDir = "cluster-autoscaler-digitalocean"

// helmPath is the helm command: $HELM, else helm on PATH (make puts bin/,
// with the helm hack/tools.mk pins, first on it) or in $GOPATH/bin. The
// chart is rendered only by helm itself, so that every check holds for
// `helm install`.
var helmPath = sync.OnceValue(func() string { return toolBinary("HELM", "helm") })

// helmBinary is helm; without it the chart tests fail rather than pass
// unchecked.
func helmBinary(t *testing.T) string {
	t.Helper()
	if helmPath() == "" {
		t.Fatal("helm not found: the chart is rendered by helm itself (make bin/helm builds the pinned one: put bin/ on PATH, or set HELM)")
	}
	return helmPath()
}

// toolBinary finds a command the tests run: the path in the environment
// variable env, else name on PATH or in $GOPATH/bin; "" when there is none.
func toolBinary(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// helm runs helm with a values file holding values and returns its stdout; an
// error carries helm's stderr (where `fail` and `required` messages go).
func helm(t *testing.T, values map[string]interface{}, args ...string) (string, error) {
	t.Helper()
	bin := helmBinary(t)
	raw, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append(args, "-f", valuesFile)...)
	// Keep helm's caches and config out of the user's home.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// release is what `helm install <name> -n <namespace> -f values.yaml` gets.
type release struct {
	name, namespace string
	values          map[string]interface{} // over the chart's values.yaml
}

// render is `helm install --dry-run=client`: the manifests (key
// "manifest.yaml") and the rendered NOTES.txt, as helm renders them.
func render(t *testing.T, rel release) (map[string]string, error) {
	t.Helper()
	out, err := helm(t, rel.values, "install", rel.name, chartDir, "--namespace", rel.namespace, "--dry-run=client", "-o", "json")
	if err != nil {
		return nil, err
	}
	var r struct {
		Manifest string `json:"manifest"`
		Info     struct {
			Notes string `json:"notes"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("helm install --dry-run output: %v\n%s", err, out)
	}
	return map[string]string{"manifest.yaml": r.Manifest, "NOTES.txt": r.Info.Notes}, nil
}

func TestHelmLint(t *testing.T) {
	t.Parallel()
	out, err := helm(t, withClusterID(nil), "lint", "--strict", chartDir)
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	if _, err := helm(t, nil, "template", "cluster-autoscaler", chartDir); err == nil ||
		!strings.Contains(err.Error(), "cloudConfig.clusterID is required") {
		t.Errorf("helm template without a cluster ID: %v, want the required message", err)
	}
}
