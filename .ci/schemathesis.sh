#!/usr/bin/env bash
# Spec-driven fuzzing: validates openapi.yaml, starts the service on a free loopback port against
# a fresh database (SQLite, then Postgres), seeds it with a real tau-bench conversation and a
# checkpoint, and runs schemathesis with every check. Any failure, or a panic in the service's
# log, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${TMPDIR:-/tmp}/gatekeeper-ci-venv"
if ! "$venv/bin/st" --version >/dev/null 2>&1 || ! "$venv/bin/openapi-spec-validator" --help >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "schemathesis==4.32.5" "openapi-spec-validator==0.9.0"
fi
"$venv/bin/st" --version
"$venv/bin/openapi-spec-validator" openapi.yaml

cargo build --quiet --bin gatekeeper
bin=target/debug/gatekeeper
examples="${SCHEMATHESIS_MAX_EXAMPLES:-100}"

run_against() { # backend database_url
  local backend=$1 url=$2
  local port data key pid
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  data=$(mktemp -d)
  key="schemathesis-$RANDOM-0123456789abcdef"
  echo "== schemathesis on $backend (port $port)"
  env GATEKEEPER_API_KEYS="ci:$key" GATEKEEPER_DATA_DIR="$data" DATABASE_URL="$url" \
    "$bin" serve --listen "127.0.0.1:$port" >"$data/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  export GATEKEEPER_URL="http://127.0.0.1:$port" GATEKEEPER_KEY="$key"
  "$bin" append ../shared/data/tau-bench-airline.jsonl.gz --only airline-0-0
  echo '{"from": 0, "to": 5, "summary_budget": 512, "finish_reason": "stop",
         "summary": "Mia (user mia_li_3668) wants a one-way flight from New York to Seattle on May 20th."}' \
    | "$bin" compact airline-0-0
  local status=0
  timeout 600 "$venv/bin/st" run openapi.yaml --url "http://127.0.0.1:$port" \
    -H "Authorization: Bearer $key" --checks all --max-examples "$examples" --seed 20261129 \
    --report junit --report-dir "$data/report" || status=$?
  kill "$pid"; wait "$pid" || true
  if grep -q "panicked" "$data/server.log"; then
    echo "the service panicked under schemathesis on $backend:"; grep -B2 -A5 panicked "$data/server.log"; status=1
  fi
  if [ -n "${DATABASE_URL_TO_DROP:-}" ]; then :; fi
  rm -rf "$data"
  unset GATEKEEPER_URL GATEKEEPER_KEY
  return "$status"
}

run_against SQLite ""
db="gk_schemathesis_$$"
run_against Postgres "postgres://postgres@127.0.0.1:5432/$db"
psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
