package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// want is what every image of the index must say about itself.
type want struct {
	source, revision, version string
	// binaries, when known, are the exact bytes each platform must carry.
	binaries map[string][]byte
}

// TestImage builds the index the way `make image BASE=offline` does and
// checks what a node pulling it meets. With IMAGE_LAYOUT set it checks that
// layout instead (the release workflow does so with the production
// binaries on distroless, before pushing), expecting IMAGE_VERSION and
// IMAGE_REVISION.
func TestImage(t *testing.T) {
	if dir := os.Getenv("IMAGE_LAYOUT"); dir != "" {
		idx, err := ReadLayout(dir)
		if err != nil {
			t.Fatal(err)
		}
		checkIndex(t, idx, want{
			source:   "https://github.com/doks-autoscaler/cluster-autoscaler",
			revision: mustEnv(t, "IMAGE_REVISION"),
			version:  mustEnv(t, "IMAGE_VERSION"),
		})
		return
	}

	bins := standInBinaries(t)
	base, err := OfflineBase(writeFile(t, "ca.crt", "-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := want{source: "https://github.com/doks-autoscaler/cluster-autoscaler", revision: "0123456789abcdef0123456789abcdef01234567", version: "v9.9.9", binaries: bins}
	binDir := t.TempDir()
	for arch, b := range bins {
		if err := os.WriteFile(filepath.Join(binDir, "cluster-autoscaler-"+arch), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := Spec{
		Platforms: platforms,
		Binary:    func(p v1.Platform) string { return filepath.Join(binDir, "cluster-autoscaler-"+p.Architecture) },
		Base:      base,
		Source:    w.source,
		Revision:  w.revision,
		Version:   w.version,
		Created:   time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	}
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	// Through the layout on disk, as push reads it.
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, idx); err != nil {
		t.Fatal(err)
	}
	read, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, read, w)

	// The same inputs give the same digest: a rebuild of a release commit
	// is the released image.
	again, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs differ: %s and %s", d1, d2)
	}
}

func TestImageRefusesBinaryOfAnotherArch(t *testing.T) {
	bins := standInBinaries(t)
	base, err := OfflineBase(writeFile(t, "ca.crt", "ca"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		binary  func(v1.Platform) string
		wantErr string
	}{
		{"swapped", func(p v1.Platform) string {
			other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[p.Architecture]
			return writeFile(t, "swapped-"+p.Architecture, string(bins[other]))
		}, "is a arm64 binary, not amd64"},
		{"not ELF", func(p v1.Platform) string { return writeFile(t, "script", "#!/bin/sh\n") }, "not an ELF binary"},
		{"missing", func(p v1.Platform) string { return filepath.Join(t.TempDir(), "none") }, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(Spec{Platforms: platforms, Binary: tc.binary, Base: base, Source: "s", Revision: "r", Version: "v"})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func checkIndex(t *testing.T, idx v1.ImageIndex, w want) {
	t.Helper()
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", mt, types.OCIImageIndex)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Annotations["org.opencontainers.image.version"]; got != w.version {
		t.Errorf("index version annotation %q, want %q", got, w.version)
	}
	var got []string
	for _, desc := range m.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		p := *desc.Platform
		got = append(got, p.OS+"/"+p.Architecture)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, p, img, w)
	}
	if strings.Join(got, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", got)
	}
}

func checkImage(t *testing.T, p v1.Platform, img v1.Image, w want) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
	}
	if c.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532 (non-root)", p, c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/cluster-autoscaler" || len(c.Cmd) != 0 {
		t.Errorf("%s: entrypoint %q cmd %q, want [/cluster-autoscaler] and no cmd (deploy/ passes only args)", p, c.Entrypoint, c.Cmd)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   w.source,
		"org.opencontainers.image.revision": w.revision,
		"org.opencontainers.image.version":  w.version,
	} {
		if c.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", p, k, c.Labels[k], v)
		}
	}

	files := flatten(t, img)
	bin, ok := files["cluster-autoscaler"]
	if !ok {
		t.Fatalf("%s: no /cluster-autoscaler in the image", p)
	}
	if bin.mode&0o111 == 0 {
		t.Errorf("%s: /cluster-autoscaler mode %o is not executable", p, bin.mode)
	}
	if arch, err := elfArch(bin.body); err != nil || arch != p.Architecture {
		t.Errorf("%s: /cluster-autoscaler is for %q (%v), want %s", p, arch, err, p.Architecture)
	}
	if w.binaries != nil && !bytes.Equal(bin.body, w.binaries[p.Architecture]) {
		t.Errorf("%s: /cluster-autoscaler is not the binary given", p)
	}
	if !strings.Contains(string(files["etc/passwd"].body), ":x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no user 65532:\n%s", p, files["etc/passwd"].body)
	}
	if len(files["etc/ssl/certs/ca-certificates.crt"].body) == 0 {
		t.Errorf("%s: no CA certificates: TLS to the DigitalOcean API would fail", p)
	}
}

type file struct {
	mode int64
	body []byte
}

// flatten reads the image's filesystem as a container runtime would
// assemble it from its layers.
func flatten(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "/")] = file{mode: h.Mode, body: body}
	}
}

// standInBinaries cross-compiles a small static program for both
// platforms, with the flags `make build` uses. The production binary's
// arm64 build compiles Kubernetes once more (minutes on a cold cache), so
// the test checks the assembly with these; the release checks the
// production index through IMAGE_LAYOUT.
func standInBinaries(t *testing.T) map[string][]byte {
	t.Helper()
	standIns.once.Do(func() { standIns.bins, standIns.skip, standIns.err = buildStandIns() })
	if standIns.skip != "" {
		t.Skip(standIns.skip)
	}
	if standIns.err != nil {
		t.Fatal(standIns.err)
	}
	return standIns.bins
}

// standIns are built once for all the tests.
var standIns struct {
	once sync.Once
	bins map[string][]byte
	skip string
	err  error
}

func buildStandIns() (map[string][]byte, string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			return nil, "SKIPPED: no go toolchain to cross-compile the stand-in binaries with; the image is unchecked", nil
		}
	}
	src, err := os.MkdirTemp("", "image-standin-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module standin\n\ngo 1.26\n"), 0o644); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() { println(\"cluster-autoscaler stand-in\") }\n"), 0o644); err != nil {
		return nil, "", err
	}
	bins := map[string][]byte{}
	for _, p := range platforms {
		out := filepath.Join(src, "bin-"+p.Architecture)
		cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("go build for %s: %v\n%s", p, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, "", err
		}
		bins[p.Architecture] = b
	}
	return bins, "", nil
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustEnv(t *testing.T, k string) string {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		t.Fatalf("IMAGE_LAYOUT is set but %s is not", k)
	}
	return v
}
