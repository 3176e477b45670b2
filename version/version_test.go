package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const root = ".."

// TestOneVersion: VERSION is the release version, and every place a user
// meets it says the same: the chart's version and appVersion (the chart's
// default image tag), the tag deploy/ pulls, the tag make push-image
// pushes, the version make build stamps into the binary, and the newest
// section of CHANGELOG.md, which becomes the release's notes.
func TestOneVersion(t *testing.T) {
	v := strings.TrimSpace(read(t, "VERSION"))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Fatalf("VERSION %q is not v and SemVer 2 (v0.1.0)", v)
	}
	bare := strings.TrimPrefix(v, "v")

	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	unmarshal(t, "charts/cluster-autoscaler-digitalocean/Chart.yaml", &chart)
	if chart.Version != bare {
		t.Errorf("Chart.yaml version %q, want %q (VERSION without its v)", chart.Version, bare)
	}
	if chart.AppVersion != v {
		t.Errorf("Chart.yaml appVersion %q, want %q: it is the chart's default image tag", chart.AppVersion, v)
	}

	var kust struct {
		Images []struct{ Name, NewTag string } `json:"images"`
	}
	unmarshal(t, "deploy/kustomization.yaml", &kust)
	if len(kust.Images) != 1 || kust.Images[0].Name != "ghcr.io/doks-autoscaler/cluster-autoscaler" || kust.Images[0].NewTag != v {
		t.Errorf("deploy/kustomization.yaml images %+v, want ghcr.io/doks-autoscaler/cluster-autoscaler at %s", kust.Images, v)
	}

	if out := makeN(t, "build"); !regexp.MustCompile(`version\.Version=` + regexp.QuoteMeta(v) + `["\s]`).MatchString(out) {
		t.Errorf("make build does not stamp %s into the binary:\n%s", v, out)
	}
	if out := makeN(t, "push-image"); !strings.Contains(out, "--tag=ghcr.io/doks-autoscaler/cluster-autoscaler:"+v+" ") ||
		!strings.Contains(out, "--version="+v+" ") {
		t.Errorf("make push-image does not push and label %s:\n%s", v, out)
	}

	sections := regexp.MustCompile(`(?m)^## \[([^\]]+)\]`).FindAllStringSubmatch(read(t, "CHANGELOG.md"), -1)
	var released []string
	for _, s := range sections {
		if s[1] != "Unreleased" {
			released = append(released, s[1])
		}
	}
	if len(released) == 0 || released[0] != bare {
		t.Errorf("CHANGELOG.md's newest release is %v, want [%s] (VERSION)", released, bare)
	}
	if out, err := exec.Command(filepath.Join(root, "hack/release-notes.sh"), v).CombinedOutput(); err != nil {
		t.Errorf("hack/release-notes.sh %s: %v\n%s", v, err, out)
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func unmarshal(t *testing.T, name string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(read(t, name)), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// makeN is what make would run for target, with the Makefile's defaults
// (VERSION unset in the environment, as in CI).
func makeN(t *testing.T, target string) string {
	t.Helper()
	cmd := exec.Command("make", "-n", "-C", root, target)
	env := []string{}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "VERSION" && k != "TAG" && k != "REGISTRY" && k != "IMAGE" && k != "LDFLAGS" {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", target, err, out)
	}
	return string(out)
}
