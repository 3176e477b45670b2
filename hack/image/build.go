package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Entrypoint is where the binary lives in the image, as in Dockerfile.amd64.
	Entrypoint = "/cluster-autoscaler"
	// User is distroless's nonroot user and group; deploy/ and the chart run
	// the pod as this uid too.
	User = "65532:65532"

	labelSource   = "org.opencontainers.image.source"
	labelRevision = "org.opencontainers.image.revision"
	labelVersion  = "org.opencontainers.image.version"
	labelCreated  = "org.opencontainers.image.created"
	labelTitle    = "org.opencontainers.image.title"
	labelDesc     = "org.opencontainers.image.description"
	annBaseName   = "org.opencontainers.image.base.name"
	annBaseDigest = "org.opencontainers.image.base.digest"
)

// Spec is what one multi-platform image is built from.
type Spec struct {
	Platforms []v1.Platform
	// Binary names the statically linked binary for a platform.
	Binary func(v1.Platform) string
	Base   Base
	// Source, Revision and Version become the OCI labels of every image and
	// the annotations of the index, so `crane config` and a registry's UI
	// both say which commit an image is.
	Source, Revision, Version string
	// Created stamps the image; the commit's time keeps rebuilds of one
	// commit byte-for-byte equal. Zero leaves the base's.
	Created time.Time
}

// Build assembles an OCI image index with one image per platform: the base
// for that platform plus one layer holding the binary at Entrypoint.
func Build(s Spec) (v1.ImageIndex, error) {
	if len(s.Platforms) == 0 {
		return nil, fmt.Errorf("no platforms")
	}
	labels := map[string]string{
		labelTitle:    "cluster-autoscaler",
		labelDesc:     "Cluster Autoscaler for DigitalOcean Kubernetes",
		labelSource:   s.Source,
		labelRevision: s.Revision,
		labelVersion:  s.Version,
	}
	if !s.Created.IsZero() {
		labels[labelCreated] = s.Created.UTC().Format(time.RFC3339)
	}
	for k, v := range labels {
		if v == "" {
			return nil, fmt.Errorf("label %s is empty", k)
		}
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range s.Platforms {
		img, baseAnn, err := buildOne(s, p, labels)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p, Annotations: baseAnn},
		})
	}
	return mutate.Annotations(idx, map[string]string{
		labelSource:   s.Source,
		labelRevision: s.Revision,
		labelVersion:  s.Version,
	}).(v1.ImageIndex), nil
}

func buildOne(s Spec, p v1.Platform, labels map[string]string) (v1.Image, map[string]string, error) {
	base, baseAnn, err := s.Base(p)
	if err != nil {
		return nil, nil, fmt.Errorf("base: %w", err)
	}
	path := s.Binary(p)
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	// A binary of the wrong architecture would only fail when a node of
	// that architecture pulls it, so refuse it here.
	if got, err := elfArch(bin); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	} else if got != p.Architecture {
		return nil, nil, fmt.Errorf("%s is a %s binary, not %s", path, got, p.Architecture)
	}
	mtime := s.Created
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	layer, err := tarLayer(mtime, tarEntry{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, body: bin})
	if err != nil {
		return nil, nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: mtime},
			CreatedBy: fmt.Sprintf("hack/image: %s at %s", filepath.Base(path), Entrypoint),
		},
		MediaType: layerMediaType(base),
	})
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	if !s.Created.IsZero() {
		cf.Created = v1.Time{Time: s.Created.UTC()}
	}
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.Cmd = nil
	cf.Config.User = User
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	maps.Copy(cf.Config.Labels, labels)
	img, err = mutate.ConfigFile(img, cf)
	return img, baseAnn, err
}

// layerMediaType matches the base's manifest: an OCI manifest gets an OCI
// layer, a Docker one a Docker layer.
func layerMediaType(base v1.Image) types.MediaType {
	if mt, err := base.MediaType(); err == nil && mt == types.DockerManifestSchema2 {
		return types.DockerLayer
	}
	return types.OCILayer
}

type tarEntry struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	body     []byte
}

// tarLayer makes a gzipped layer of the entries, owned by root unless an
// entry says otherwise, all stamped mtime so the layer's digest depends on
// its content only.
func tarLayer(mtime time.Time, entries ...tarEntry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, strings.TrimSuffix(e.name, "/")+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
