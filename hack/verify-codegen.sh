#!/usr/bin/env bash
# Fails when a generated file (deep copies, clientsets, listers, informers,
# CRDs in deploy/ and the chart) is not what `make generate` makes from the
# API types now. It generates into a copy of the tree and diffs, so the
# checkout is left alone.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd -P)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$repo"
crds=charts/cluster-autoscaler-digitalocean/crds
mkdir -p "$tmp/deploy" "$tmp/$crds"
cp go.mod go.sum "$tmp/"
cp -R apis "$tmp/apis"
cp -R deploy/crds "$tmp/deploy/crds"
cp "$crds"/* "$tmp/$crds/"
hack/update-codegen.sh "$tmp" >/dev/null
if ! diff -r apis "$tmp/apis" || ! diff -r deploy/crds "$tmp/deploy/crds" || ! diff -r "$crds" "$tmp/$crds"; then
	echo "generated files are stale: run make generate and commit the result" >&2
	exit 1
fi
