#!/usr/bin/env bash
# No Docker engine runs on CI machines, so the docker targets (and the image
# targets, which need none but push to a registry) are checked by what
# `make -n` would run: the commands, the tags and the files they use.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "verify-docker-targets: $*" >&2; exit 1; }
expect() { # <output> <fixed string> <what>
  grep -qF -- "$2" <<<"$1" || fail "$3: expected '$2' in:"$'\n'"$1"
}

out=$(make -n build-in-docker BUILD_TAGS=digitalocean GOARCH=amd64 VERSION=v9.9.9)
expect "$out" "docker build -t autoscaling-builder builder/" "build-in-docker builds the builder image"
expect "$out" "make build BUILD_TAGS=\"digitalocean\" GOARCH=amd64 VERSION=v9.9.9" "build-in-docker runs make build with the same tags"

out=$(make -n build BUILD_TAGS=digitalocean GOARCH=amd64 VERSION=v9.9.9)
expect "$out" "-tags \"digitalocean\"" "build honours BUILD_TAGS"
expect "$out" "version.Version=v9.9.9" "build stamps the version"
expect "$out" "-o cluster-autoscaler-amd64" "build names the binary per arch"

out=$(make -n make-image TAG=v9.9.9)
expect "$out" "docker build -f Dockerfile.amd64 -t ghcr.io/doks-autoscaler/cluster-autoscaler:v9.9.9 ." "make-image"
out=$(make -n push-docker-image TAG=v9.9.9)
expect "$out" "docker push ghcr.io/doks-autoscaler/cluster-autoscaler:v9.9.9" "push-docker-image"

out=$(make -n image VERSION=v9.9.9 REVISION=abc123)
expect "$out" "GOARCH=amd64 go build" "image builds the amd64 binary"
expect "$out" "GOARCH=arm64 go build" "image builds the arm64 binary"
expect "$out" "version.Version=v9.9.9" "image stamps the version into both binaries"
expect "$out" "--platforms=linux/amd64,linux/arm64 --base=gcr.io/distroless/static:nonroot@sha256:" "image is distroless, pinned, for both platforms"
expect "$out" "--version=v9.9.9 --revision=abc123" "image labels the version and revision"
expect "$out" "IMAGE_LAYOUT=$PWD/_output/image IMAGE_VERSION=v9.9.9 IMAGE_REVISION=abc123" "image checks the index it built"
out=$(make -n push-image REGISTRY=registry.digitalocean.com/example TAG=v9.9.9)
expect "$out" "push --layout=$PWD/_output/image --tag=registry.digitalocean.com/example/cluster-autoscaler:v9.9.9" "push-image"

grep -q '^COPY cluster-autoscaler-amd64 ' Dockerfile.amd64 || fail "Dockerfile.amd64 must copy the binary make build writes"
grep -q '^USER 65532' Dockerfile.amd64 || fail "Dockerfile.amd64 must run as non-root"
grep -q '^FROM golang:1.26' builder/Dockerfile || fail "builder/Dockerfile must hold the Go 1.26 toolchain"
echo "docker targets OK"
