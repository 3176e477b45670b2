#!/usr/bin/env bash
# The tools `make test` runs are pinned in hack/tools.mk alone. Kueue's version
# is also the one test/e2e/kueue_test.go reads Kueue's CRDs at: fail when the two
# disagree, or when a script installs one of the tools with a version of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
pin() { sed -n "s/^$1[[:space:]]*:=[[:space:]]*//p" hack/tools.mk; }
fail=0
kueue=$(pin KUEUE_VERSION)
e2e=$(sed -n 's/^const kueueVersion = "\(.*\)"$/\1/p' test/e2e/kueue_test.go)
if [[ -z "$kueue" || "$kueue" != "$e2e" ]]; then
  echo "verify-tools: hack/tools.mk pins Kueue $kueue, test/e2e/kueue_test.go's kueueVersion is $e2e" >&2
  fail=1
fi
# No script, workflow or makefile installs one of them at a version of its own.
if git grep -nE 'go install .*(helm\.sh/helm/|prometheus/cmd/promtool|rhysd/actionlint|sigs\.k8s\.io/kueue/)' \
    -- '*.sh' '*.yml' '*.yaml' '*.mk' Makefile .ci/run ':!hack/tools.mk' ':!hack/verify-tools.sh'; then
  echo "verify-tools: the lines above install a tool hack/tools.mk pins: use make bin/<tool>" >&2
  fail=1
fi
exit "$fail"
