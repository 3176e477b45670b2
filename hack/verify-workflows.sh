#!/usr/bin/env bash
# Lints .github/workflows with actionlint (syntax, expressions, action
# inputs, and the shell of run: steps when shellcheck is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
actionlint=$(command -v actionlint || echo "$(go env GOPATH)/bin/actionlint")
if [[ ! -x "$actionlint" ]]; then
  echo "verify-workflows: actionlint not found: go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12 (as .ci/run does)" >&2
  exit 1
fi
"$actionlint" -no-color
echo "workflows OK"
