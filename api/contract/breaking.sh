#!/usr/bin/env bash
# The breaking-change check of the API contract: oasdiff compares the
# committed documents of api/openapi with those of an earlier commit
# (default HEAD~1, the commit before). A breaking change passes only when
# the same change acknowledges it, by adding a line naming it to
# api/openapi/breaking-changes.txt: lines that were there before
# acknowledge nothing any more, so every break is deliberate once.
#
#   api/contract/breaking.sh [base-commit]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
base=${1:-HEAD~1}
# oasdiff, pinned: `go run` checks it against the Go checksum database.
oasdiff=(go run github.com/oasdiff/oasdiff@v1.36.0)
ack=api/openapi/breaking-changes.txt

if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "breaking-change check: no commit $base to compare with"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# What this change acknowledges: the lines it adds to the list.
git diff --no-ext-diff -U0 "$base" -- "$ack" | grep '^+' | grep -v '^+++' | cut -c2- >"$tmp/ack" || true
for doc in openapi.json openapi-3.0.json; do
  if ! git cat-file -e "$base:api/openapi/$doc" 2>/dev/null; then
    echo "breaking-change check: $base has no api/openapi/$doc, nothing to compare"
    continue
  fi
  git show "$base:api/openapi/$doc" >"$tmp/$doc"
  echo "breaking-change check: api/openapi/$doc against $base"
  if ! "${oasdiff[@]}" breaking "$tmp/$doc" "api/openapi/$doc" --format singleline --fail-on WARN \
    --err-ignore "$tmp/ack" --warn-ignore "$tmp/ack"; then
    echo "Breaking changes to the API (above). If they are meant, acknowledge each in $ack, in the same commit:"
    echo "one line per change, its method, path and text as printed (e.g. GET /v1/sales/{id} added the pattern ...)."
    exit 1
  fi
done
