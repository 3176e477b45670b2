package main

import (
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// localRegistry is go-containerregistry's in-memory registry over real
// HTTP; the tool talks to it as to ghcr.io or DigitalOcean's.
func localRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestPushThenBuildOnRegistryBase: push sends the layout's index to a
// registry under its own digest, and a build on a base pulled from a
// registry takes each platform's base image and names it in the index.
func TestPushThenBuildOnRegistryBase(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials: anonymous, as the local registry wants
	host := localRegistry(t)
	bins := standInBinaries(t)
	binDir := t.TempDir()
	for arch, b := range bins {
		if err := os.WriteFile(filepath.Join(binDir, "cluster-autoscaler-"+arch), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	offline, err := OfflineBase(writeFile(t, "ca.crt", "ca"))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Platforms: platforms,
		Binary:    func(p v1.Platform) string { return filepath.Join(binDir, "cluster-autoscaler-"+p.Architecture) },
		Base:      offline,
		Source:    "https://github.com/doks-autoscaler/cluster-autoscaler",
		Revision:  "0123456789abcdef0123456789abcdef01234567",
		Version:   "v9.9.9",
	}
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, idx); err != nil {
		t.Fatal(err)
	}
	digestFile := filepath.Join(t.TempDir(), "digest")
	tag := host + "/doks-autoscaler/cluster-autoscaler:v9.9.9"
	if err := pushCmd([]string{"--layout", dir, "--tag", tag, "--digest-file", digestFile}); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	wantD, _ := idx.Digest()
	got, _ := pulled.Digest()
	if got != wantD {
		t.Errorf("registry holds %s under the tag, the layout %s", got, wantD)
	}
	if b, _ := os.ReadFile(digestFile); strings.TrimSpace(string(b)) != wantD.String() {
		t.Errorf("digest file %q, want %s (what the release signs)", b, wantD)
	}
	checkIndex(t, pulled, want{source: spec.Source, revision: spec.Revision, version: spec.Version, binaries: bins})

	// The pushed index is now a base, as distroless is for releases.
	base, err := RegistryBase(tag)
	if err != nil {
		t.Fatal(err)
	}
	spec.Base, spec.Version = base, "v9.9.10"
	onBase, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onBase.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	pm, _ := pulled.IndexManifest()
	for i, d := range m.Manifests {
		if d.Annotations[annBaseName] != tag || d.Annotations[annBaseDigest] != pm.Manifests[i].Digest.String() {
			t.Errorf("%s: base annotations %v, want %s at %s", d.Platform, d.Annotations, tag, pm.Manifests[i].Digest)
		}
	}
	checkIndex(t, onBase, want{source: spec.Source, revision: spec.Revision, version: "v9.9.10", binaries: bins})

	// A base without one of the platforms is refused, not silently replaced.
	spec.Platforms = append(platforms[:1:1], v1.Platform{OS: "linux", Architecture: "s390x"})
	if _, err := Build(spec); err == nil || !strings.Contains(err.Error(), "s390x") {
		t.Errorf("build on a base without s390x: error %v", err)
	}
}
