#!/usr/bin/env bash
# Regenerates what the API types in apis/ imply: deep copies and CRDs
# (controller-gen), the typed clientsets, listers and informers
# (code-generator's client-gen, lister-gen, informer-gen). The generators are
# pinned in hack/tools/go.mod, a module of its own, so the main go.mod does
# not carry them. With a directory argument it writes into that copy of the
# tree instead (hack/verify-codegen.sh diffs the two).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd -P)"
root="$(cd "${1:-$repo}" && pwd -P)"
module=github.com/doks-autoscaler/cluster-autoscaler
bin="$repo/bin/codegen"

go build -C "$repo/hack/tools" -o "$bin/" \
	sigs.k8s.io/controller-tools/cmd/controller-gen \
	k8s.io/code-generator/cmd/client-gen \
	k8s.io/code-generator/cmd/lister-gen \
	k8s.io/code-generator/cmd/informer-gen

cd "$root"
rm -f deploy/crds/autoscaling.x-k8s.io_*.yaml
# One run, one load of the packages: deep copies beside the types, CRDs in deploy/crds.
"$bin/controller-gen" object crd paths=./apis/... output:crd:artifacts:config=deploy/crds
# Helm installs CRDs from the chart's crds/: the same files, byte for byte.
rm -f charts/cluster-autoscaler-digitalocean/crds/autoscaling.x-k8s.io_*.yaml
cp deploy/crds/autoscaling.x-k8s.io_*.yaml charts/cluster-autoscaler-digitalocean/crds/

# One clientset per API, for the version the autoscaler reads (the older
# served versions exist for the CRD alone).
for api in capacitybuffer/v1beta1 provisioningrequest/v1; do
	out="apis/${api%/*}/client"
	rm -rf "$out"
	"$bin/client-gen" --go-header-file /dev/null \
		--input-base "$module/apis" --input "$api" --clientset-name versioned \
		--output-dir "$out/clientset" --output-pkg "$module/$out/clientset"
	"$bin/lister-gen" --go-header-file /dev/null \
		--output-dir "$out/listers" --output-pkg "$module/$out/listers" "$module/apis/$api"
	"$bin/informer-gen" --go-header-file /dev/null \
		--versioned-clientset-package "$module/$out/clientset/versioned" \
		--listers-package "$module/$out/listers" \
		--output-dir "$out/informers" --output-pkg "$module/$out/informers" "$module/apis/$api"
done
