package charts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// helmBinary is the helm command: $HELM, else helm on PATH or in $GOPATH/bin
// (where .ci/run installs it). Without helm the chart is still checked by the
// text/template rendering of chart_test.go; this file proves that rendering
// is what helm produces, so every check there holds for `helm install`.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if h, err := exec.LookPath("helm"); err == nil {
		return h
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		h := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(h); err == nil {
			return h
		}
	}
	t.Skip("helm not found (set HELM, or: go install helm.sh/helm/v4/cmd/helm@v4.3.2); the text/template checks still ran")
	return ""
}

// helm runs helm with a values file holding values and returns its stdout.
func helm(t *testing.T, bin string, values map[string]interface{}, args ...string) (string, error) {
	t.Helper()
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

func byKindAndName(objs []runtime.Object) map[string]runtime.Object {
	out := map[string]runtime.Object{}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			panic(err)
		}
		out[fmt.Sprintf("%T %s/%s", o, m.GetNamespace(), m.GetName())] = o
	}
	return out
}

func TestHelmLint(t *testing.T) {
	bin := helmBinary(t)
	out, err := helm(t, bin, withClusterID(nil), "lint", "--strict", chartDir)
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	if _, err := helm(t, bin, nil, "template", "cluster-autoscaler", chartDir); err == nil ||
		!strings.Contains(err.Error(), "cloudConfig.clusterID is required") {
		t.Errorf("helm template without a cluster ID: %v, want the required message", err)
	}
}

// helm template and the test rendering give the same objects, for the
// defaults, every common value overridden, and RBAC brought by the user.
func TestHelmRendersWhatTheTestsCheck(t *testing.T) {
	bin := helmBinary(t)
	for _, rel := range []release{
		{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(nil)},
		{name: "ca", namespace: "autoscaler", values: overrideValues()},
		{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(map[string]interface{}{
			"rbac":           map[string]interface{}{"create": false},
			"serviceAccount": map[string]interface{}{"create": false, "name": "preexisting"},
			"service":        map[string]interface{}{"enabled": true},
		})},
	} {
		t.Run(rel.name+"-"+rel.namespace, func(t *testing.T) {
			rendered, err := render(t, rel)
			if err != nil {
				t.Fatal(err)
			}
			ours, ourCRDs := decode(t, rendered)
			out, err := helm(t, bin, rel.values, "template", rel.name, chartDir, "--namespace", rel.namespace)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			theirs, theirCRDs := decode(t, map[string]string{"helm.yaml": out})
			a, b := byKindAndName(ours), byKindAndName(theirs)
			var keys []string
			for k := range a {
				keys = append(keys, k)
			}
			for k := range b {
				if _, ok := a[k]; !ok {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !reflect.DeepEqual(a[k], b[k]) {
					ay, _ := yaml.Marshal(a[k])
					by, _ := yaml.Marshal(b[k])
					t.Errorf("%s differs\ntest rendering:\n%s\nhelm:\n%s", k, ay, by)
				}
			}
			if !reflect.DeepEqual(ourCRDs, theirCRDs) {
				t.Errorf("ServiceMonitor differs\ntest rendering: %v\nhelm: %v", ourCRDs, theirCRDs)
			}
		})
	}
}
