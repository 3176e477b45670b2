# The command-line tools `make test` runs, pinned here and nowhere else.
#
# Each is built from the Go module proxy with `go install <pkg>@<version>` (the
# tool's own go.mod, not this repository's) into bin/ under a versioned name,
# bin/<tool>-<version>, and bin/<tool> links to it: the first target that
# needs a tool builds it, and changing a version below rebuilds it on next use.
# bin/ is gitignored; `make clean` empties it.
#
# The code generators are pinned elsewhere, in hack/tools/go.mod, because
# they are built from one module graph with k8s.io/code-generator; these four
# are not: each keeps the dependency versions its release was tested with.

HELM_PKG           := helm.sh/helm/v4/cmd/helm
HELM_VERSION       := v4.3.2
# remove_all_sd leaves out the service-discovery plugins (cloud SDKs) that
# `promtool test rules` never uses: about 40 s to build instead of many minutes.
PROMTOOL_PKG       := github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_VERSION   := v0.316.0
PROMTOOL_TAGS      := remove_all_sd
ACTIONLINT_PKG     := github.com/rhysd/actionlint/cmd/actionlint
ACTIONLINT_VERSION := v1.7.12
# test/e2e/kueue_test.go reads Kueue's CRDs at the same version (kueueVersion);
# hack/verify-tools.sh fails when the two differ.
KUEUE_PKG          := sigs.k8s.io/kueue/cmd/kueue
KUEUE_VERSION      := v0.17.0

# Targets are relative (bin/helm), so that `make bin/helm` names them; the
# Makefile puts $(CURDIR)/bin first on PATH for every recipe.
TOOLS_BIN  := bin
HELM       := $(TOOLS_BIN)/helm
PROMTOOL   := $(TOOLS_BIN)/promtool
ACTIONLINT := $(TOOLS_BIN)/actionlint
KUEUE      := $(TOOLS_BIN)/kueue
TOOLS      := $(HELM) $(PROMTOOL) $(ACTIONLINT) $(KUEUE)

# go-install-tool: $(1) name, $(2) package, $(3) version, $(4) build tags.
# GOBIN is a scratch directory so that a failed or interrupted build leaves
# no bin/<tool>-<version> behind to be taken for a good one.
define go-install-tool
$(TOOLS_BIN)/$(1)-$(3):
	@mkdir -p $(TOOLS_BIN)
	@echo "building $(2)@$(3) into bin/ (once)"
	rm -rf $(TOOLS_BIN)/.$(1)-$(3).tmp
	GOBIN=$(CURDIR)/$(TOOLS_BIN)/.$(1)-$(3).tmp go install $(if $(4),-tags $(4)) $(2)@$(3)
	mv $(TOOLS_BIN)/.$(1)-$(3).tmp/$(1) $$@
	rm -rf $(TOOLS_BIN)/.$(1)-$(3).tmp

$(TOOLS_BIN)/$(1): $(TOOLS_BIN)/$(1)-$(3)
	ln -sf $(1)-$(3) $$@
endef

$(eval $(call go-install-tool,helm,$(HELM_PKG),$(HELM_VERSION),))
$(eval $(call go-install-tool,promtool,$(PROMTOOL_PKG),$(PROMTOOL_VERSION),$(PROMTOOL_TAGS)))
$(eval $(call go-install-tool,actionlint,$(ACTIONLINT_PKG),$(ACTIONLINT_VERSION),))
$(eval $(call go-install-tool,kueue,$(KUEUE_PKG),$(KUEUE_VERSION),))

.PHONY: tools
tools: $(TOOLS)
