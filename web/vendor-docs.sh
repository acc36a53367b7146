#!/usr/bin/env bash
# Refreshes the API reference renderer that /docs serves from the binary
# (web/static/docs/elements): Stoplight Elements' built files from its npm
# package, at the pinned version below. `go build` runs no npm; this script
# is run by hand to move the pin, and its output is committed.
#
#   web/vendor-docs.sh            # the pinned version
#   web/vendor-docs.sh 9.0.16     # another one (then update the pin)
set -euo pipefail
cd "$(dirname "$0")"
version=${1:-9.0.15}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# npm checks the tarball against the registry's integrity hash.
(cd "$tmp" && npm pack --silent "@stoplight/elements@$version" >/dev/null && tar xzf stoplight-elements-*.tgz)
out=static/docs/elements
mkdir -p "$out"
cp "$tmp/package/web-components.min.js" "$tmp/package/styles.min.css" "$tmp/package/web-components.min.js.LICENSE.txt" "$out/"
cp "$tmp/package/LICENSE" "$out/LICENSE.txt"
echo "Stoplight Elements $version in web/$out"
