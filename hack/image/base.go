package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Base gives the image a platform's binary is added to, and the
// annotations that name it in the index (none when it has no registry name).
type Base func(v1.Platform) (v1.Image, map[string]string, error)

// RegistryBase pulls the platform's image of ref, which must be an index
// carrying every platform built (as gcr.io/distroless/static:nonroot is).
// Releases use it; the image's descriptor in our index names the base by
// reference and digest, as the OCI annotations for a base image specify.
func RegistryBase(ref string) (Base, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	// The name without the pinned digest: the digest annotation is the
	// platform image's, not the index's the reference pins.
	baseName, _, _ := strings.Cut(ref, "@")
	return func(p v1.Platform) (v1.Image, map[string]string, error) {
		img, err := remote.Image(r, remote.WithPlatform(p), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return nil, nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, nil, err
		}
		// remote.Image falls back to a single-platform image whatever the
		// platform asked for: check it is the one asked for.
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			return nil, nil, fmt.Errorf("%s has no %s image (got %s/%s)", ref, p, cf.OS, cf.Architecture)
		}
		d, err := img.Digest()
		if err != nil {
			return nil, nil, err
		}
		return img, map[string]string{annBaseName: baseName, annBaseDigest: d.String()}, nil
	}, nil
}

// Offline base: what the autoscaler needs of distroless static:nonroot,
// made without a registry so that `make image` and its test work with no
// network. Only the release's base is distroless itself.
var (
	offlinePasswd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	offlineGroup    = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	offlineNSSwitch = "hosts: files dns\n"
)

// OfflineBase builds a base of one layer: /etc/passwd and /etc/group with
// the nonroot user (65532), the CA bundle read from caFile (TLS to the
// DigitalOcean API needs it), /etc/nsswitch.conf, /tmp and /home/nonroot.
// It holds no tzdata: the autoscaler loads no time zone.
func OfflineBase(caFile string) (Base, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the offline base: %w", err)
	}
	epoch := time.Unix(0, 0)
	layer, err := tarLayer(epoch,
		tarEntry{name: "etc", mode: 0o755, dir: true},
		tarEntry{name: "etc/passwd", mode: 0o644, body: []byte(offlinePasswd)},
		tarEntry{name: "etc/group", mode: 0o644, body: []byte(offlineGroup)},
		tarEntry{name: "etc/nsswitch.conf", mode: 0o644, body: []byte(offlineNSSwitch)},
		tarEntry{name: "etc/ssl", mode: 0o755, dir: true},
		tarEntry{name: "etc/ssl/certs", mode: 0o755, dir: true},
		tarEntry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca},
		tarEntry{name: "home", mode: 0o755, dir: true},
		tarEntry{name: "home/nonroot", mode: 0o700, uid: 65532, gid: 65532, dir: true},
		tarEntry{name: "tmp", mode: 0o1777, dir: true},
	)
	if err != nil {
		return nil, err
	}
	return func(p v1.Platform) (v1.Image, map[string]string, error) {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err := mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/image: offline base"},
		})
		if err != nil {
			return nil, nil, err
		}
		img, err = mutate.Config(img, v1.Config{
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			WorkingDir: "/home/nonroot",
			User:       User,
		})
		return img, nil, err
	}, nil
}
