# DOKS Cluster Autoscaler.
#   make build                 binary for this machine's arch (BUILD_TAGS, GOARCH, LDFLAGS honoured)
#   make test                  everything CI runs: verify, unit tests, end-to-end tests
#   make demo                  local sandbox walk-through, no DigitalOcean account needed
#   make bench [UPSTREAM_CA=path]  benchmark figures, with upstream's beside them when given
#   make build-in-docker BUILD_TAGS=digitalocean && make make-image && make push-image

SHELL        := /bin/bash
MODULE       := github.com/doks-autoscaler/cluster-autoscaler
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOARCH       ?= $(shell go env GOARCH)
BUILD_TAGS   ?=
LDFLAGS      ?= -s -w -X $(MODULE)/version.Version=$(VERSION)
REGISTRY     ?= ghcr.io/doks-autoscaler
IMAGE        ?= $(REGISTRY)/cluster-autoscaler
TAG          ?= $(VERSION)
BUILDER_IMAGE ?= autoscaling-builder
BINARY       := cluster-autoscaler-$(GOARCH)
E2E_TIMEOUT  ?= 30m
# hack/bench's own tests check how it computes figures; they start no sandbox.
UNIT_PKGS     = $$(go list ./... | grep -v -e /test/e2e -e /hack/) ./hack/bench
# UPSTREAM_CA: another autoscaler binary (upstream's) that make bench runs beside this one.
UPSTREAM_CA  ?=

.PHONY: build test verify unit e2e bench demo sandbox build-in-docker make-image push-image clean fmt vet

build:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -tags "$(BUILD_TAGS)" -ldflags "$(LDFLAGS)" -o $(BINARY) .

test: verify unit e2e demo

verify:
	hack/verify-gofmt.sh
	go vet ./...
	hack/verify-docker-targets.sh

unit:
	go test -count=1 $(UNIT_PKGS)

e2e: build
	CA_BINARY=$(CURDIR)/$(BINARY) go test -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/

bench: build
	go test -run '^$$' -bench . -benchmem ./core/... ./simulator/...
	CA_BINARY=$(CURDIR)/$(BINARY) go run ./hack/bench $(if $(UPSTREAM_CA),--upstream-binary=$(UPSTREAM_CA))

demo: build
	CA_BINARY=$(CURDIR)/$(BINARY) go run ./hack/demo

sandbox:
	go run ./cmd/sandbox

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet ./...

# Builds inside the autoscaling-builder image (Go toolchain only), so the
# binary does not depend on the host's Go.
build-in-docker:
	docker build -t $(BUILDER_IMAGE) builder/
	docker run --rm -v $(CURDIR):/src -w /src -e GOARCH=$(GOARCH) $(BUILDER_IMAGE) \
		make build BUILD_TAGS="$(BUILD_TAGS)" GOARCH=$(GOARCH) VERSION=$(VERSION)

make-image:
	docker build -f Dockerfile.amd64 -t $(IMAGE):$(TAG) .

push-image:
	docker push $(IMAGE):$(TAG)

clean:
	rm -f cluster-autoscaler-* 
	rm -rf bin/ _output/
