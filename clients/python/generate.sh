#!/usr/bin/env bash
# Regenerates src/gatekeeper_client/_generated from the repository's openapi.yaml with the pinned
# openapi-python-client. With --check, regenerates into a scratch folder and fails on any
# difference from what is committed (CI runs that, so the client cannot drift from the contract).
set -euo pipefail
cd "$(dirname "$0")"
generator="${OPENAPI_PYTHON_CLIENT:-openapi-python-client}"
target=src/gatekeeper_client/_generated
out=$target
if [[ "${1:-}" == "--check" ]]; then
  out=$(mktemp -d)/_generated
fi
"$generator" generate --path ../../openapi.yaml --meta none --config openapi-python-client.yaml \
  --output-path "$out" --overwrite >/dev/null
if [[ "$out" != "$target" ]]; then
  if ! diff -r -x __pycache__ "$target" "$out"; then
    echo "src/gatekeeper_client/_generated differs from what openapi.yaml generates: run clients/python/generate.sh" >&2
    exit 1
  fi
  echo "the generated client matches openapi.yaml"
fi
