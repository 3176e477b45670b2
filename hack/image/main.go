// Command image builds the autoscaler's multi-platform OCI image from the
// binaries `make build` writes, and pushes it, with no container engine:
//
//	image build --base=gcr.io/distroless/static:nonroot@sha256:… --platforms=linux/amd64,linux/arm64 \
//	    --binary=/src/cluster-autoscaler-{arch} --version=v0.1.0 --revision=<commit> --out=/src/_output/image
//	image build --base=offline …   # no registry: a base made here (see OfflineBase)
//	image push --layout=/src/_output/image --tag=ghcr.io/doks-autoscaler/cluster-autoscaler:v0.1.0
//
// build writes an OCI image layout whose index.json holds one image index;
// push sends that index, its images and their blobs to the tag (credentials
// from ~/.docker/config.json, which `docker login`, docker/login-action and
// `doctl registry login` write) and prints its digest. The Makefile's
// `image` and `push-image` targets run it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = buildCmd(os.Args[2:])
	case "push":
		err = pushCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want build or push", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func buildCmd(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	binary := fs.String("binary", "", "path of each platform's binary; {arch} stands for its GOARCH")
	base := fs.String("base", "", `base image reference (an index with every platform), or "offline"`)
	caFile := fs.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle the offline base carries")
	source := fs.String("source", "https://github.com/doks-autoscaler/cluster-autoscaler", "org.opencontainers.image.source")
	revision := fs.String("revision", "", "commit the binaries were built from")
	version := fs.String("version", "", "release version, as the image tag (v0.1.0)")
	created := fs.String("created", "", "image creation time, RFC 3339 (the commit's time keeps builds reproducible)")
	out := fs.String("out", "", "OCI image layout directory to write (replaced)")
	fs.Parse(args)
	if *binary == "" || *base == "" || *out == "" {
		return fmt.Errorf("build needs --binary, --base and --out")
	}

	s := Spec{Source: *source, Revision: *revision, Version: *version}
	for _, p := range strings.Split(*platforms, ",") {
		pl, err := v1.ParsePlatform(p)
		if err != nil {
			return err
		}
		s.Platforms = append(s.Platforms, *pl)
	}
	s.Binary = func(p v1.Platform) string { return strings.ReplaceAll(*binary, "{arch}", p.Architecture) }
	if *created != "" {
		t, err := time.Parse(time.RFC3339, *created)
		if err != nil {
			return fmt.Errorf("--created: %w", err)
		}
		s.Created = t
	}
	var err error
	if *base == "offline" {
		s.Base, err = OfflineBase(*caFile)
	} else {
		s.Base, err = RegistryBase(*base)
	}
	if err != nil {
		return err
	}

	idx, err := Build(s)
	if err != nil {
		return err
	}
	if err := WriteLayout(*out, idx); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: index %s (%s)\n", *out, d, *platforms)
	return nil
}

// WriteLayout replaces dir with an OCI image layout holding idx.
func WriteLayout(dir string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx)
}

// ReadLayout returns the one image index a layout written by build holds.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d manifests, want the one image index build writes", dir, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

func pushCmd(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "", "OCI image layout written by build")
	tags := fs.String("tag", "", "comma-separated references to push to (registry/repo:tag)")
	digestFile := fs.String("digest-file", "", "also write the pushed index's digest here (for signing)")
	fs.Parse(args)
	if *dir == "" || *tags == "" {
		return fmt.Errorf("push needs --layout and --tag")
	}
	idx, err := ReadLayout(*dir)
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	for _, t := range strings.Split(*tags, ",") {
		ref, err := name.NewTag(t)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		fmt.Printf("pushed %s@%s\n", ref.Context(), d)
	}
	if *digestFile != "" {
		return os.WriteFile(*digestFile, []byte(d.String()+"\n"), 0o644)
	}
	return nil
}
