#!/usr/bin/env bash
# Prints CHANGELOG.md's section for a version (v-prefixed or not), without
# its heading: the GitHub release's notes. Fails when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1:?usage: hack/release-notes.sh vX.Y.Z}
v=${v#v}
notes=$(awk -v h="## [$v]" '
  index($0, h) == 1 { on = 1; next }
  on && /^## \[/    { exit }
  on && /^\[[^]]+\]: / { exit }
  on                { print }
' CHANGELOG.md | sed -e '/./,$!d')
if [[ -z "${notes//[[:space:]]/}" ]]; then
  echo "release-notes: CHANGELOG.md has no entries under ## [$v]" >&2
  exit 1
fi
printf '%s\n' "$notes"
