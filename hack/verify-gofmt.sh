#!/usr/bin/env bash
# Fails listing the Go files gofmt would change.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n "$bad" ]]; then
  echo "gofmt needed on:"; echo "$bad"; exit 1
fi
