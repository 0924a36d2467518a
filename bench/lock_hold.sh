#!/usr/bin/env bash
# How long a persisted compaction proposal holds its conversation's write lock, as the service
# itself reports it (gatekeeper_write_lock_seconds{operation="propose"}: from the lock taken to the
# transaction's end), beside the client-side latency. Loopback only, bounded in time, cleans up
# after itself (service stopped, database dropped), also on failure.
#
#   bench/lock_hold.sh                                  # build with cargo, 100 proposals
#   LOCK_BIN=/tmp/gk-before-bin/gatekeeper bench/lock_hold.sh   # a given binary, not built
#
# Steps: build (unless LOCK_BIN) · fresh database · the service on a free loopback port ·
# seed LOCK_CONVS conversations of 2,000 tau-bench turns through the API (bench/load.py's template
# and appends, client token counts) · LOCK_PROPOSALS persisted proposals over [0, 1999] from
# LOCK_CLIENTS concurrent clients, spread over the conversations (load.py's bodies: `narrowed`) ·
# /metrics · one summary line and a Markdown table · stop the service, drop the database.
#
# Knobs (environment): LOCK_BIN (a gatekeeper binary; default: cargo build --release),
# LOCK_CONVS (20), LOCK_PROPOSALS (100), LOCK_CLIENTS (4), LOCK_TURNS (2000), LOCK_DB
# (gk_lock_hold; dropped if it exists, dropped at the end), LOCK_KEEP_STATE=1 (keep the working
# folder; always kept on failure), PGHOST/PGPORT/PGUSER (127.0.0.1/5432/postgres), TAU_DATA.
# Details: bench/README.md.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# ------------------------------------------------------------------ settings

export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
LOCK_DB=${LOCK_DB:-gk_lock_hold}
LOCK_CONVS=${LOCK_CONVS:-20}
LOCK_PROPOSALS=${LOCK_PROPOSALS:-100}
LOCK_CLIENTS=${LOCK_CLIENTS:-4}
LOCK_TURNS=${LOCK_TURNS:-2000}
TAU_DATA=${TAU_DATA:-$ROOT/../shared/data/tau-bench-airline.jsonl.gz}
TENANT=bench
SEED_TIMEOUT=600        # seconds for the seed (template + appends)
PROPOSE_TIMEOUT=600     # seconds for the proposals and the report
REQUEST_TIMEOUT=60      # seconds per HTTP request

[[ $LOCK_DB =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "lock_hold.sh: LOCK_DB must be a plain lower-case name" >&2; exit 2; }
for v in LOCK_CONVS LOCK_PROPOSALS LOCK_CLIENTS LOCK_TURNS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "lock_hold.sh: $v must be a positive integer" >&2; exit 2; }
done

STATE=$(mktemp -d "${TMPDIR:-/tmp}/gatekeeper-lock-hold.XXXXXX")
SERVICE_PID=""
DATABASE_TOUCHED=0
KEY=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

# ------------------------------------------------------------------ helpers

say() { printf '\n\033[1m== %s\033[0m  (%ss)\n' "$*" "$SECONDS"; }
die() { echo "lock_hold.sh: $*" >&2; exit 1; }
gk() {
  local limit=$1; shift
  timeout --kill-after=10 "$limit" python3 "$ROOT/bench/lock_hold.py" --url "$URL" --key "$KEY" \
    --state "$STATE" --clients "$LOCK_CLIENTS" --convs "$LOCK_CONVS" --turns "$LOCK_TURNS" \
    --timeout "$REQUEST_TIMEOUT" "$@"
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  if [[ -n $SERVICE_PID ]] && kill -0 "$SERVICE_PID" 2>/dev/null; then
    kill -TERM "$SERVICE_PID"
    for _ in $(seq 60); do kill -0 "$SERVICE_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$SERVICE_PID" 2>/dev/null
    wait "$SERVICE_PID" 2>/dev/null
  fi
  if ((DATABASE_TOUCHED)); then
    timeout 60 psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $LOCK_DB WITH (FORCE)" >/dev/null 2>&1 \
      || echo "lock_hold.sh: could not drop $LOCK_DB" >&2
  fi
  if ((rc != 0)); then
    echo "lock_hold.sh: failed (exit $rc) after ${SECONDS}s" >&2
    [[ -f $STATE/service.log ]] && { echo "--- last lines of the service log:" >&2; tail -n 20 "$STATE/service.log" >&2; }
  fi
  if [[ ${LOCK_KEEP_STATE:-0} == 1 || $rc != 0 ]]; then
    echo "lock_hold.sh: working files kept in $STATE" >&2
  else
    rm -rf "$STATE"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ steps

build_service() {
  if [[ -n ${LOCK_BIN:-} ]]; then
    BIN=$LOCK_BIN
    say "service binary: $BIN (LOCK_BIN, not built)"
  else
    say "cargo build --release"
    cargo build --release --bin gatekeeper
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/gatekeeper
  fi
  [[ -x $BIN ]] || die "no executable at $BIN"
}

check_tools() {
  local t
  for t in python3 psql pg_isready curl timeout; do
    command -v "$t" >/dev/null || die "$t is missing"
  done
  [[ -f $TAU_DATA ]] || die "no tau-bench data at $TAU_DATA (set TAU_DATA)"
  timeout 10 pg_isready -q || die "no Postgres at $PGHOST:$PGPORT (bench/load.sh starts one with pg_ctlcluster)"
}

start_service() {
  say "service against a fresh database $LOCK_DB"
  DATABASE_TOUCHED=1
  PGOPTIONS='-c client_min_messages=warning' timeout 60 psql -X -q -v ON_ERROR_STOP=1 -d postgres \
    -c "DROP DATABASE IF EXISTS $LOCK_DB WITH (FORCE)" -c "CREATE DATABASE $LOCK_DB" >/dev/null
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  URL=http://127.0.0.1:$port
  DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/$LOCK_DB" \
  GATEKEEPER_LISTEN=127.0.0.1:$port \
  GATEKEEPER_API_KEYS="$TENANT:$KEY" \
  GATEKEEPER_LOG=warn \
    "$BIN" serve >"$STATE/service.log" 2>&1 &
  SERVICE_PID=$!
  for _ in $(seq 120); do
    curl -fsS -m 2 "$URL/readyz" >/dev/null 2>&1 && break
    kill -0 "$SERVICE_PID" 2>/dev/null || die "the service exited at start"
    sleep 0.5
  done
  curl -fsS -m 2 "$URL/readyz" >/dev/null || die "the service is not ready after 60 s"
  echo "  pid $SERVICE_PID at $URL"
}

seed() {
  say "seed: $LOCK_CONVS conversations × $LOCK_TURNS tau-bench turns"
  gk "$SEED_TIMEOUT" seed --data "$TAU_DATA"
}

propose() {
  say "proposals: $LOCK_PROPOSALS persisted over [0, $((LOCK_TURNS - 1))], $LOCK_CLIENTS clients"
  echo "  binary $BIN · $(nproc) cores · load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
  gk "$PROPOSE_TIMEOUT" propose --proposals "$LOCK_PROPOSALS" | tee "$STATE/report.txt"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

main() {
  echo "lock_hold.sh: $LOCK_PROPOSALS proposals, $LOCK_CLIENTS clients, $LOCK_CONVS conversations × $LOCK_TURNS turns, working folder $STATE"
  build_service
  check_tools
  start_service
  seed
  propose
  say "done"
}

main "$@"
