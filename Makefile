# DOKS Cluster Autoscaler.
#   make build                 binary for this machine's arch (BUILD_TAGS, GOARCH, LDFLAGS honoured)
#   make test                  everything CI runs: verify, unit tests, end-to-end tests
#                              (the first run builds the pinned helm, promtool, actionlint
#                              and kueue into bin/: hack/tools.mk)
#   make generate              deep copies, clientsets, listers, informers and CRDs from apis/
#   make demo                  local sandbox walk-through, no DigitalOcean account needed
#   make bench [UPSTREAM_CA=path]  benchmark figures, with upstream's beside them when given
#   make chaos [CHAOS_DURATION=10m]  pools on demand under churn, lost write answers, a leader kill; fails on a bad figure
#   make consolidation [UPSTREAM_CA=path]  a workload grown then shrunk to a third: price against a lower bound, consolidation off / on / upstream; fails on a bad safety figure
#   make image [BASE_IMAGE=offline]  multi-arch OCI image in _output/image, no container engine
#   make push-image [REGISTRY=...]    the same, pushed to $(IMAGE):$(TAG)
#   make build-in-docker BUILD_TAGS=digitalocean && make make-image && make push-docker-image

SHELL        := /bin/bash
comma        := ,
MODULE       := github.com/doks-autoscaler/cluster-autoscaler
# The release version lives in VERSION alone; Chart.yaml, deploy/kustomization.yaml
# and CHANGELOG.md repeat it, and version/'s test fails when they disagree.
VERSION      ?= $(shell cat VERSION)
GOARCH       ?= $(shell go env GOARCH)
BUILD_TAGS   ?=
LDFLAGS      ?= -s -w -X $(MODULE)/version.Version=$(VERSION)
REGISTRY     ?= ghcr.io/doks-autoscaler
IMAGE        ?= $(REGISTRY)/cluster-autoscaler
TAG          ?= $(VERSION)
BUILDER_IMAGE ?= autoscaling-builder
BINARY       := cluster-autoscaler-$(GOARCH)
# make image: the platforms, and the base. Releases use distroless static:nonroot,
# pinned by digest; BASE_IMAGE=offline makes a stand-in here with no registry.
PLATFORMS    ?= linux/amd64,linux/arm64
BASE_IMAGE   ?= gcr.io/distroless/static:nonroot@sha256:e2e927ec666bae08560abb3c55d0659eceabb657f56b6782ab500a9fc7f555e3
IMAGE_LAYOUT ?= _output/image
REVISION     ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME  ?= $(shell git log -1 --format=%cI 2>/dev/null)
# push-image writes the pushed index's digest here when set (the release signs it).
DIGEST_FILE  ?=
E2E_TIMEOUT  ?= 30m
# hack/bench's own tests check how it computes figures; they start no sandbox.
UNIT_PKGS     = $$(go list ./... | grep -v -e /test/e2e -e /hack/) ./hack/bench
# UPSTREAM_CA: another autoscaler binary (upstream's) that make bench runs beside this one.
UPSTREAM_CA  ?=
# CHAOS_DURATION: how long make chaos churns the workloads (1m for a smoke run).
CHAOS_DURATION ?= 10m

# helm, promtool, actionlint and kueue: pinned in hack/tools.mk, built into bin/
# on first use. bin/ comes first on PATH for every recipe, so that the tests
# and scripts, which look the tools up on PATH, run the pinned ones.
# build stays the default goal: the included rules come first in the file.
.DEFAULT_GOAL := build
include hack/tools.mk
export PATH := $(CURDIR)/bin:$(PATH)

.PHONY: build generate test verify unit e2e bench chaos consolidation demo sandbox image push-image build-in-docker make-image push-docker-image clean fmt vet

build:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -tags "$(BUILD_TAGS)" -ldflags "$(LDFLAGS)" -o $(BINARY) .

test: verify unit e2e demo

# The generators are pinned in hack/tools/go.mod (its own module).
generate:
	hack/update-codegen.sh

verify: $(ACTIONLINT)
	hack/verify-gofmt.sh
	hack/verify-tools.sh
	hack/verify-codegen.sh
	go vet ./...
	go vet -C hack/image ./...
	hack/verify-docker-targets.sh
	hack/verify-workflows.sh

# hack/image is its own module: go test ./... does not reach it.
# The chart tests (charts/) render with helm and test the alerts with promtool.
unit: $(HELM) $(PROMTOOL)
	go test -count=1 $(UNIT_PKGS)
	go test -C hack/image -count=1 ./...

# The e2e tests install the chart with helm and run Kueue's controller.
e2e: build $(HELM) $(KUEUE)
	CA_BINARY=$(CURDIR)/$(BINARY) go test -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/

bench: build
	go test -run '^$$' -bench . -benchmem ./core/... ./simulator/...
	CA_BINARY=$(CURDIR)/$(BINARY) go run ./hack/bench $(if $(UPSTREAM_CA),--upstream-binary=$(UPSTREAM_CA))

chaos: build
	CA_BINARY=$(CURDIR)/$(BINARY) go run ./hack/bench --chaos --chaos-duration=$(CHAOS_DURATION)

consolidation: build
	CA_BINARY=$(CURDIR)/$(BINARY) go run ./hack/bench --consolidation $(if $(UPSTREAM_CA),--upstream-binary=$(UPSTREAM_CA))

demo: build
	CA_BINARY=$(CURDIR)/$(BINARY) go run ./hack/demo

sandbox:
	go run ./cmd/sandbox

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet ./...

# One binary per platform, then the image index assembled from them (hack/image)
# and checked as the index a node would pull: platforms, user, entrypoint,
# labels, each binary's architecture.
image:
	$(foreach p,$(subst $(comma), ,$(PLATFORMS)),$(MAKE) build GOARCH=$(notdir $(p)) VERSION=$(VERSION) BUILD_TAGS="$(BUILD_TAGS)" &&) true
	go run -C hack/image . build --platforms=$(PLATFORMS) --base=$(BASE_IMAGE) \
		--binary=$(CURDIR)/cluster-autoscaler-{arch} --out=$(CURDIR)/$(IMAGE_LAYOUT) \
		--version=$(VERSION) --revision=$(REVISION) --created=$(COMMIT_TIME)
	IMAGE_LAYOUT=$(CURDIR)/$(IMAGE_LAYOUT) IMAGE_VERSION=$(VERSION) IMAGE_REVISION=$(REVISION) \
		go test -C hack/image -count=1 -run '^TestImage$$' .

# Credentials come from ~/.docker/config.json (docker login, doctl registry login).
push-image: image
	go run -C hack/image . push --layout=$(CURDIR)/$(IMAGE_LAYOUT) --tag=$(IMAGE):$(TAG) \
		$(if $(DIGEST_FILE),--digest-file=$(abspath $(DIGEST_FILE)))

# Builds inside the autoscaling-builder image (Go toolchain only), so the
# binary does not depend on the host's Go.
build-in-docker:
	docker build -t $(BUILDER_IMAGE) builder/
	docker run --rm -v $(CURDIR):/src -w /src -e GOARCH=$(GOARCH) $(BUILDER_IMAGE) \
		make build BUILD_TAGS="$(BUILD_TAGS)" GOARCH=$(GOARCH) VERSION=$(VERSION)

make-image:
	docker build -f Dockerfile.amd64 -t $(IMAGE):$(TAG) .

push-docker-image:
	docker push $(IMAGE):$(TAG)

clean:
	rm -f cluster-autoscaler-* 
	rm -rf bin/ _output/
