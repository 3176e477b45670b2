#!/usr/bin/env bash
# Lints .github/workflows with actionlint (syntax, expressions, action
# inputs, and the shell of run: steps when shellcheck is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
# make verify puts bin/ first on PATH, with the actionlint hack/tools.mk pins.
actionlint=$(command -v actionlint || echo "$PWD/bin/actionlint")
if [[ ! -x "$actionlint" ]]; then
  echo "verify-workflows: actionlint not found: make bin/actionlint builds the pinned one (make verify does)" >&2
  exit 1
fi
"$actionlint" -no-color
echo "workflows OK"
