#!/usr/bin/env bash
# Load and benchmark run of the gatekeeper against Postgres, each figure beside its reference
# from the same run (issue 7). Loopback only, bounded in time, cleans up after itself.
#
#   bench/load.sh                    # full run (about 8 minutes plus the build); writes docs/performance.md
#   LOAD_SCALE=0.05 bench/load.sh    # quick end-to-end check (small seed, short durations)
#
# Steps: install wrk/pgbench if missing · build the release binary · start Postgres if needed ·
# start the service on a free loopback port against a fresh database · seed it through the API
# (tau-bench conversations repeated to >= 1M turns in 10,000 conversations, checkpoints on half) ·
# measure reconstruct (wrk) vs pgbench -S, appends vs COPY, compactions vs one SELECT, compaction
# range sizes, reconstruct while large token-less batches are appended, search (bench/search.py),
# RSS · write the table ·
# stop the service and drop the databases (also on failure).
#
# Knobs (environment): LOAD_SCALE (1), LOAD_DURATION (30 s per throughput measurement at scale
# 1), LOAD_OUT (output file; docs/performance.md at scale 1, a file under /tmp otherwise),
# LOAD_BIN (use this gatekeeper binary instead of building), LOAD_KEEP_STATE=1 (keep the working
# folder), LOAD_PROFILE=1 (perf profile of the service during the reconstruct load), LOAD_PATHS
# (200,000 reconstruct paths at scale 1), LOAD_TEMPLATE (a template.json from an earlier run's
# kept folder: the same turns and anchors for every binary compared, since the anchors a binary
# derives become the seed's client anchors and so the summaries' length),
# LOAD_REPLICA (1: measure reconstruct through a second process reading from a streaming
# replica made with pg_basebackup -R; needs root for runuser postgres; 0 skips it),
# LOAD_PG_PARTITIONS (GATEKEEPER_PG_PARTITIONS for the service: hash partitions of the big
# tables; unset: none), LOAD_ROUNDS (3: paired rounds of reconstruct then pgbench, and of the
# appends then COPY; the median round's ratio is reported), PGHOST/PGPORT/PGUSER
# (127.0.0.1/5432/postgres), LOAD_DB (gk_bench).
# Details: bench/README.md.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# ------------------------------------------------------------------ settings

LOAD_SCALE=${LOAD_SCALE:-1}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
BENCH_DB=${LOAD_DB:-gk_bench}
PGBENCH_DB=${BENCH_DB}_pgbench
TAU_DATA=${TAU_DATA:-$ROOT/../shared/data/tau-bench-airline.jsonl.gz}
TENANT=bench
CLIENTS=4               # concurrent HTTP clients for seeding and appends
CONNS=64                # reconstruct connections, and pgbench clients
PGBENCH_SCALE=10

# scaled FULL MIN: FULL × LOAD_SCALE, rounded, at least MIN.
scaled() { python3 -c 'import sys; f, m, s = map(float, sys.argv[1:]); print(max(int(m), int(round(f * s))))' "$1" "$2" "$LOAD_SCALE"; }

DURATION=$(scaled "${LOAD_DURATION:-30}" 5)   # seconds per throughput measurement
SEED_CONVS=$(scaled 10000 100)                   # × 4 tau-bench conversations ≈ 106 turns each
PATHS=$(scaled "${LOAD_PATHS:-200000}" 3000)     # reconstruct paths (the file wrk draws from)
HOT_PATHS=10000                                  # the hot set: the file's first 10,000 paths
APPEND_CONVS=$(scaled 150 4)                     # × 2,000 turns, for each append measurement
CMP_N=$((APPEND_CONVS < 100 ? APPEND_CONVS : 100))  # persisted 2,000-turn proposals
BIG_TURNS=32000                                  # the range-size series needs it at any scale
SIZES=500,2000,8000,32000
SIZE_REPS=9
ROUNDS=${LOAD_ROUNDS:-3}                         # paired rounds of reconstruct/pgbench and appends/COPY
STALL_SECONDS=$(scaled 20 5)
STALL_CONNS=16
STALL_BATCH=10000

if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) == 1 else 1)' "$LOAD_SCALE"; then
  OUT=${LOAD_OUT:-$ROOT/docs/performance.md}
else
  OUT=${LOAD_OUT:-${TMPDIR:-/tmp}/gatekeeper-performance-scale-$LOAD_SCALE.md}
fi

STATE=$(mktemp -d "${TMPDIR:-/tmp}/gatekeeper-load.XXXXXX")
RESULTS=$STATE/results.tsv
PATHS_FILE=$STATE/paths.txt
SERVICE_PID=""
APPENDER_PID=""
REPLICA_DIR=""          # the streaming replica's cluster, while it runs
REPLICA_SERVICE_PID=""
LAUNCHED_PID=""         # the service launch_service last started
DATABASES_TOUCHED=0
KEY=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
# The append rounds after the first write as a tenant of their own, so the tenant-wide search
# measures the same tenant whatever the number of rounds.
ROUNDS_TENANT=bench-rounds
ROUNDS_KEY=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

# ------------------------------------------------------------------ helpers

say() { printf '\n\033[1m== %s\033[0m  (%ss)\n' "$*" "$SECONDS"; }
die() { echo "load.sh: $*" >&2; exit 1; }
put() { printf '%s\t%s\n' "$1" "$2" >>"$RESULTS"; echo "  $1 = $2"; }
pg() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
gk() { python3 "$ROOT/bench/load.py" --url "$URL" --key "${GK_KEY:-$KEY}" --state "$STATE" --clients "$CLIENTS" "$@"; }
stats() { python3 "$ROOT/bench/load.py" stats; }   # numbers on stdin → "n p50 p99 mean max"
# rss_phase NAME: the service's peak RSS since the last call, then the peak is reset.
rss_phase() {
  put "rss_peak_${1}_mib" "$(mib "$(status_kib VmHWM)")"
  echo 5 >"/proc/$SERVICE_PID/clear_refs" 2>/dev/null || true
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVICE_PID/stat"; }   # user + system
status_kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$SERVICE_PID/status"; }
mib() { python3 -c 'import sys; print(f"{int(sys.argv[1]) / 1024:.1f}")' "$1"; }
div() { python3 -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.6g}")' "$1" "$2"; }

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  if [[ -n $APPENDER_PID ]] && kill -0 "$APPENDER_PID" 2>/dev/null; then
    kill "$APPENDER_PID"; wait "$APPENDER_PID" 2>/dev/null
  fi
  stop_replica
  # A service that never came up (launch_service died waiting for it).
  if [[ -n $LAUNCHED_PID && $LAUNCHED_PID != "$SERVICE_PID" ]] && kill -0 "$LAUNCHED_PID" 2>/dev/null; then
    kill -KILL "$LAUNCHED_PID"
  fi
  if [[ -n $SERVICE_PID ]] && kill -0 "$SERVICE_PID" 2>/dev/null; then
    kill -TERM "$SERVICE_PID"
    for _ in $(seq 60); do kill -0 "$SERVICE_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$SERVICE_PID" 2>/dev/null
    wait "$SERVICE_PID" 2>/dev/null
  fi
  if ((DATABASES_TOUCHED)); then
    pg -d postgres -c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" \
       -c "DROP DATABASE IF EXISTS $PGBENCH_DB WITH (FORCE)" >/dev/null 2>&1 \
      || echo "load.sh: could not drop $BENCH_DB / $PGBENCH_DB" >&2
  fi
  if ((rc != 0)); then
    echo "load.sh: failed (exit $rc) after ${SECONDS}s" >&2
    [[ -f $STATE/service.log ]] && { echo "--- last lines of the service log:" >&2; tail -n 20 "$STATE/service.log" >&2; }
  fi
  if [[ ${LOAD_KEEP_STATE:-0} == 1 || $rc != 0 ]]; then
    echo "load.sh: working files kept in $STATE" >&2
  else
    rm -rf "$STATE"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ setup

apt_install() {
  ((EUID == 0)) || die "$* missing and not root: install it (apt-get install $*)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$@" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null; }
}

install_tools() {
  say "tools"
  command -v python3 >/dev/null || apt_install python3
  command -v psql >/dev/null || apt_install postgresql-client
  # wrk: C + LuaJIT, cheap per request (it shares 2 cores with the service), scriptable paths.
  command -v wrk >/dev/null || apt_install wrk
  # On Debian, pgbench ships with the server package, which postgresql-contrib pulls in.
  command -v pgbench >/dev/null || apt_install postgresql-contrib
  echo "  $(wrk --version 2>&1 | head -n1 | cut -d' ' -f1-2) · $(pgbench --version) · $(python3 --version)"
}

build_service() {
  if [[ -n ${LOAD_BIN:-} ]]; then
    BIN=$LOAD_BIN
    say "service binary: $BIN (LOAD_BIN, not built)"
  else
    say "cargo build --release"
    cargo build --release --bin gatekeeper
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/gatekeeper
  fi
  [[ -x $BIN ]] || die "no executable at $BIN"
}

start_postgres() {
  say "postgres at $PGHOST:$PGPORT"
  if ! pg_isready -q; then
    local version
    version=$(find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -n | tail -n1)
    [[ -n $version ]] || die "Postgres is not running and no cluster is in /etc/postgresql"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    for _ in $(seq 60); do pg_isready -q && break; sleep 0.5; done
    pg_isready -q || die "Postgres did not come up"
  fi
  PG_VERSION=$(pg -d postgres -Atc "SHOW server_version" | cut -d' ' -f1)
  PG_STARTED=$(pg -d postgres -Atc "SELECT pg_postmaster_start_time()")
  echo "  PostgreSQL $PG_VERSION, max_connections $(pg -d postgres -Atc 'SHOW max_connections')"
}

# launch_service PORT LOG [VAR=VALUE ...]: a service process on the bench database at PORT, with
# the extra environment given; waits until it is ready and sets LAUNCHED_PID.
launch_service() {
  local port=$1 log=$2
  shift 2
  DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/$BENCH_DB${LOAD_DB_QUERY:+?$LOAD_DB_QUERY}" \
  GATEKEEPER_LISTEN=127.0.0.1:$port \
  GATEKEEPER_API_KEYS="$TENANT:$KEY,$ROUNDS_TENANT:$ROUNDS_KEY" \
  GATEKEEPER_LOG=warn \
    env ${LOAD_PG_PARTITIONS:+GATEKEEPER_PG_PARTITIONS=$LOAD_PG_PARTITIONS} "$@" "$BIN" serve >"$log" 2>&1 &
  LAUNCHED_PID=$!
  for _ in $(seq 120); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return
    kill -0 "$LAUNCHED_PID" 2>/dev/null || die "the service exited at start (log: $log)"
    sleep 0.5
  done
  die "the service is not ready after 60 s (log: $log)"
}

start_service() {
  say "service"
  DATABASES_TOUCHED=1
  pg -d postgres -c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" -c "CREATE DATABASE $BENCH_DB" >/dev/null
  local port
  port=$(free_port)
  URL=http://127.0.0.1:$port
  launch_service "$port" "$STATE/service.log"
  SERVICE_PID=$LAUNCHED_PID
  sleep 1
  put rss_idle_mib "$(mib "$(status_kib VmRSS)")"
  rss_phase start
  echo "  pid $SERVICE_PID at $URL, database $BENCH_DB"
}

record_meta() {
  put date "$(date -u '+%Y-%m-%d %H:%M UTC')"
  put nproc "$(nproc)"
  put cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  put mem_gib "$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)"
  put pg_version "$PG_VERSION"
  local commit
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ -n ${LOAD_BIN:-} ]]; then
    commit="$commit (binary from LOAD_BIN)"
  elif [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no -- src Cargo.toml Cargo.lock migrations 2>/dev/null) ]]; then
    commit="$commit + uncommitted changes"
  fi
  put commit "$commit"
  put scale "$LOAD_SCALE"
  put partitions "${LOAD_PG_PARTITIONS:-0}"
  put duration_s "$DURATION"
  put loadavg_start "$(cut -d' ' -f1-3 /proc/loadavg)"
}

# ------------------------------------------------------------------ measurements

seed() {
  say "seed: template (200 tau-bench conversations, service-side counting)"
  [[ -f $TAU_DATA ]] || die "no tau-bench data at $TAU_DATA"
  if [[ -n ${LOAD_TEMPLATE:-} ]]; then
    cp "$LOAD_TEMPLATE" "$STATE/template.json"
    echo "  template from $LOAD_TEMPLATE (LOAD_TEMPLATE)"
  else
    gk template --data "$TAU_DATA"
  fi
  say "seed: $SEED_CONVS conversations, checkpoints, $PATHS reconstruct paths"
  put seed_per 4
  put seed_clients "$CLIENTS"
  gk seed --convs "$SEED_CONVS" --per 4 --paths "$PATHS" --paths-file "$PATHS_FILE"
  # Let autovacuum/analyze see the seeded tables before anything is measured.
  pg -d "$BENCH_DB" -c "VACUUM ANALYZE" >/dev/null
  rss_phase seed
}

# run_wrk PREFIX CONNECTIONS THREADS SECONDS [PATHS]: GETs of paths drawn at random from the
# path file; figures as PREFIX_*, with the service's CPU time per request.
run_wrk() {
  local prefix=$1 conns=$2 threads=$3 secs=$4 paths=${5:-$PATHS_FILE} ticks cpu_us k v
  ticks=$(cpu_ticks)
  wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 10s \
    -H "authorization: Bearer $KEY" -s "$ROOT/bench/requests.lua" "$URL" -- "$paths" \
    >"$STATE/wrk-$prefix.txt"
  cpu_us=$((($(cpu_ticks) - ticks) * 1000000 / $(getconf CLK_TCK)))
  while read -r k v; do put "${prefix}_${k#wrk.}" "$v"; done < <(grep '^wrk\.' "$STATE/wrk-$prefix.txt")
  put "${prefix}_service_cpu_us" "$(div "$cpu_us" "$(awk '$1 == "wrk.requests" { print $2 }' "$STATE/wrk-$prefix.txt")")"
}

# Paired rounds, each the service's reconstruct load then pgbench's, back to back; the median
# round's figures are the table's (load.py rounds).
measure_reconstruct() {
  say "reconstruct: $ROUNDS rounds of wrk -t2 -c$CONNS -d${DURATION}s, then pgbench -S -M prepared -c $CONNS -j 2 -T $DURATION"
  put rec_conns "$CONNS"
  put rounds "$ROUNDS"
  init_pgbench
  # Neither side is timed while the other's writes (the seed, pgbench -i) are still being flushed.
  pg -d postgres -c CHECKPOINT >/dev/null
  # Warm-up (connections, pool, caches), not recorded.
  wrk -t2 -c"$CONNS" -d3s -H "authorization: Bearer $KEY" -s "$ROOT/bench/requests.lua" "$URL" -- "$PATHS_FILE" >/dev/null
  gk metrics --tag before
  local perf_pid="" r
  if [[ ${LOAD_PROFILE:-0} == 1 ]]; then
    command -v perf >/dev/null || apt_install linux-perf
    perf record -F 999 -o "$STATE/perf-reconstruct.data" -p "$SERVICE_PID" -- sleep "$DURATION" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "  round $r"
    run_wrk "rec_r$r" "$CONNS" 2 "$DURATION"
    run_pgbench "pgb_r$r"
  done
  gk metrics --tag after
  gk rounds --ours rec --ref pgb --ours-key rps --ref-key tps --rounds "$ROUNDS" --sum errors,requests
  pg -d postgres -c "DROP DATABASE IF EXISTS $PGBENCH_DB" >/dev/null
  # The same on a hot set that fits the answer cache (agents re-read recent turns).
  head -n "$HOT_PATHS" "$PATHS_FILE" >"$STATE/hot-paths.txt"
  put rec_hot_paths "$(wc -l <"$STATE/hot-paths.txt")"
  run_wrk rec_hot "$CONNS" 2 3 "$STATE/hot-paths.txt" >/dev/null   # warm-up
  run_wrk rec_hot "$CONNS" 2 "$DURATION" "$STATE/hot-paths.txt"
  if [[ -n $perf_pid ]]; then
    wait "$perf_pid" || true
    local profile=$STATE/perf-reconstruct.txt
    { perf report -i "$STATE/perf-reconstruct.data" --no-children --stdio --sort dso --percent-limit 1 2>/dev/null
      perf report -i "$STATE/perf-reconstruct.data" --no-children --stdio --sort dso,symbol --percent-limit 0.3 2>/dev/null
    } | grep -v '^#' | grep -v '^$' | sed -e 's/ \{2,\}/  /g' -e 's/ *- *- *$//' | cut -c1-200 >"$profile" || true
    echo "  service profile during the reconstruct load (perf: by object, then symbols; kept in $profile):"
    head -n 40 "$profile" | sed 's/^/    /'
  fi
  rss_phase reconstruct
}

# The reference's database: pgbench -i -s PGBENCH_SCALE, apart from the service's.
init_pgbench() {
  pg -d postgres -c "DROP DATABASE IF EXISTS $PGBENCH_DB" -c "CREATE DATABASE $PGBENCH_DB" >/dev/null
  pgbench -i -q -s "$PGBENCH_SCALE" "$PGBENCH_DB" >"$STATE/pgbench-init.txt" 2>&1
}

# run_pgbench PREFIX: the reconstruct reference, pgbench -S -M prepared, figures as PREFIX_*.
run_pgbench() {
  local prefix=$1 dir=$STATE/$1 tps n p50 p99
  mkdir -p "$dir"
  (cd "$dir" && pgbench -n -S -M prepared -c "$CONNS" -j 2 -T "$DURATION" \
     -l --sampling-rate 0.05 --log-prefix lat "$PGBENCH_DB") >"$dir.txt" 2>&1 \
    || { cat "$dir.txt" >&2; die "pgbench failed"; }
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time).*/\1/p' "$dir.txt")
  [[ -n $tps ]] || { cat "$dir.txt" >&2; die "no tps in pgbench's output"; }
  put "${prefix}_tps" "$tps"
  put "${prefix}_mean_ms" "$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$dir.txt")"
  # Per-transaction log: client, transaction, latency (µs), ...
  read -r n p50 p99 _ _ < <(cat "$dir"/lat.* | awk '{ print $3 / 1000 }' | stats)
  put "${prefix}_sampled" "$n"
  put "${prefix}_p50_ms" "$p50"
  put "${prefix}_p99_ms" "$p99"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
as_postgres() { runuser -u postgres -- "/usr/lib/postgresql/${PG_VERSION%%.*}/bin/$1" "${@:2}"; }

stop_replica() {
  if [[ -n $REPLICA_SERVICE_PID ]] && kill -0 "$REPLICA_SERVICE_PID" 2>/dev/null; then
    kill -TERM "$REPLICA_SERVICE_PID"; wait "$REPLICA_SERVICE_PID" 2>/dev/null
  fi
  REPLICA_SERVICE_PID=""
  if [[ -n $REPLICA_DIR ]]; then
    as_postgres pg_ctl -D "$REPLICA_DIR/data" stop -m fast -w >/dev/null 2>&1
    rm -rf "$REPLICA_DIR"
    REPLICA_DIR=""
  fi
}

# Reconstruct through a second service process whose reads go to a streaming replica of the
# seeded database (the primary's service idle meanwhile): the same paths, connections and
# duration as the primary's figure. The replica is made here, after the seed, so that it costs
# the other measurements nothing, and stopped before the appends.
measure_replica_reads() {
  if [[ ${LOAD_REPLICA:-1} != 1 ]]; then return; fi
  if ((EUID != 0)); then echo "  not root (runuser postgres): no replica column"; return; fi
  say "replica: pg_basebackup -R, a second service reading from it, wrk -t2 -c$CONNS -d${DURATION}s"
  local hba port rport started
  hba=$(pg -d postgres -Atc "SHOW hba_file")
  if ! grep -q "^host replication all 127.0.0.1/32 trust" "$hba"; then
    echo "host replication all 127.0.0.1/32 trust" >>"$hba"
    pg -d postgres -c "SELECT pg_reload_conf()" >/dev/null
  fi
  REPLICA_DIR=$(mktemp -d /tmp/gatekeeper-replica.XXXXXX)
  chown postgres:postgres "$REPLICA_DIR"
  rport=$(free_port)
  started=$(date +%s.%N)
  as_postgres pg_basebackup -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -D "$REPLICA_DIR/data" -R -X stream -c fast
  put replica_basebackup_s "$(python3 -c "import time; print(round(time.time() - $started, 1))")"
  # Debian keeps a cluster's configuration outside its data folder: the copy gets its own,
  # with the server's defaults otherwise (as the primary runs).
  printf "port = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nhot_standby = on\nssl = off\n" \
    "$rport" "$REPLICA_DIR" >"$REPLICA_DIR/data/postgresql.conf"
  printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' >"$REPLICA_DIR/data/pg_hba.conf"
  chown -R postgres:postgres "$REPLICA_DIR"
  as_postgres pg_ctl -D "$REPLICA_DIR/data" -l "$REPLICA_DIR/log" start -w -t 120 >/dev/null
  port=$(free_port)
  local rurl=http://127.0.0.1:$port
  launch_service "$port" "$STATE/replica-service.log" \
    GATEKEEPER_READ_DATABASE_URLS="postgres://$PGUSER@127.0.0.1:$rport/$BENCH_DB"
  REPLICA_SERVICE_PID=$LAUNCHED_PID
  URL=$rurl SERVICE_PID=$REPLICA_SERVICE_PID run_wrk rep "$CONNS" 2 3 >/dev/null   # warm-up
  URL=$rurl SERVICE_PID=$REPLICA_SERVICE_PID run_wrk rep "$CONNS" 2 "$DURATION"
  # Which database answered: the service's own count.
  local metrics replica primary
  metrics=$(curl -fsS -H "authorization: Bearer $KEY" "$rurl/metrics")
  replica=$(awk '/^gatekeeper_replica_reads_total/ && !/replica="primary"/ { n += $2 } END { print n + 0 }' <<<"$metrics")
  primary=$(awk '/^gatekeeper_replica_reads_total/ && /replica="primary"/ { n += $2 } END { print n + 0 }' <<<"$metrics")
  put rep_reads_replica "$replica"
  put rep_reads_primary "$primary"
  stop_replica
}

# Paired rounds, each the two append runs then the COPY of the same rows; per line the median
# round's figures (load.py rounds). The first round's conversations are the later phases'.
measure_appends() {
  say "appends: $ROUNDS rounds of $APPEND_CONVS × 2,000 turns in batches of 500, $CLIENTS clients, then COPY"
  put append_convs "$APPEND_CONVS"
  put append_turns_per_conv 2000
  put append_batch 500
  put append_clients "$CLIENTS"
  local r key=$KEY suffix="" csv=(--tenant "$TENANT" --csv-dir "$STATE/copy")
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "  round $r"
    # The first round writes the COPY's files (the same rows every round) and the conversations
    # the later phases use.
    ((r == 1)) || { key=$ROUNDS_KEY suffix=-r$r csv=(); }
    GK_KEY=$key gk append --label "app_tok_r$r" --prefix "ap-tok$suffix" --convs "$APPEND_CONVS" \
      --turns 2000 --batch 500 "${csv[@]}"
    GK_KEY=$key gk append --label "app_notok_r$r" --prefix "ap-notok$suffix" --convs "$APPEND_CONVS" \
      --turns 2000 --batch 500 --no-tokens
    measure_copy "copy_r$r"
  done
  local label
  for label in app_tok app_notok; do
    gk rounds --ours "$label" --ref copy --ref-out "${label}_copy" --ours-key turns_per_s --ref-key rows_per_s --rounds "$ROUNDS"
  done
  rss_phase appends
}

# measure_copy PREFIX: the appends' reference, figures as PREFIX_*.
measure_copy() {
  local prefix=$1
  echo "  reference: COPY of the same rows, $CLIENTS psql streams"
  pg -d "$BENCH_DB" >/dev/null <<SQL
CREATE TABLE turns_copy (LIKE turns INCLUDING ALL);
ALTER TABLE turns_copy ADD FOREIGN KEY (tenant, conversation) REFERENCES conversations (tenant, conversation);
INSERT INTO conversations (tenant, conversation)
  SELECT '$TENANT', 'copy-' || i FROM generate_series(0, $APPEND_CONVS - 1) AS i;
SQL
  local start end f pids=()
  start=$(date +%s.%N)
  for f in "$STATE"/copy/copy-*.csv; do
    pg -d "$BENCH_DB" -c "\\copy turns_copy (tenant, conversation, id, role, content, tokens, anchors, external_id) FROM '$f' WITH (FORMAT csv)" &
    pids+=($!)
  done
  for f in "${pids[@]}"; do wait "$f"; done
  end=$(date +%s.%N)
  local rows seconds
  rows=$(pg -d "$BENCH_DB" -Atc "SELECT count(*) FROM turns_copy")
  ((rows == APPEND_CONVS * 2000)) || die "COPY loaded $rows rows, expected $((APPEND_CONVS * 2000))"
  seconds=$(python3 -c "print($end - $start)")
  put "${prefix}_rows" "$rows"
  put "${prefix}_s" "$seconds"
  put "${prefix}_rows_per_s" "$(div "$rows" "$seconds")"
  pg -d "$BENCH_DB" -c "DROP TABLE turns_copy" -c "DELETE FROM conversations WHERE conversation LIKE 'copy-%'" >/dev/null
}

# select_sql CONVERSATION TO: the reference read of a proposal over [0, TO].
select_sql() {
  echo "SELECT id, role, tokens, anchors FROM turns WHERE tenant = '$TENANT' AND conversation = '$1' AND id BETWEEN 0 AND $2;"
}

# timed_selects FILE: runs the SELECTs in FILE through psql, prints each one's time in ms.
timed_selects() {
  { printf '\\timing on\n\\o /dev/null\n'; cat "$1"; } | pg -d "$BENCH_DB" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}

measure_compactions() {
  say "compactions: $CMP_N sequential persisted proposals over 2,000 turns"
  local sql=$STATE/sel2k.sql i n p50 p99
  for ((i = 0; i < CMP_N; i++)); do select_sql "ap-tok-$i" 1999; done >"$sql"
  timed_selects "$sql" >/dev/null   # warm-up: both sides read warm pages
  gk compact --label cmp2k --prefix ap-tok --convs "$CMP_N" --turns-per-conv 2000 --range 2000
  read -r n p50 p99 _ _ < <(timed_selects "$sql" | stats)
  put sel2k_n "$n"
  put sel2k_p50_ms "$p50"
  put sel2k_p99_ms "$p99"
  rss_phase compactions
}

# The ceilings of one primary: single-turn appends (wrk, 64 connections, over 1,000
# conversations) and persisted 100-turn checkpoints (4 clients, each on its own conversations).
measure_ceilings() {
  say "ceilings: single-turn appends (wrk -c$CONNS), 100-turn checkpoints ($CLIENTS clients)"
  local requests=$STATE/append-one.tsv k v
  gk onerequests --prefix one --convs 1000 --out "$requests"
  wrk -t2 -c"$CONNS" -d"${DURATION}s" --timeout 10s -H "authorization: Bearer $KEY" \
    -s "$ROOT/bench/requests.lua" "$URL" -- "$requests" >"$STATE/wrk-append-one.txt"
  while read -r k v; do put "ceil_app_${k#wrk.}" "$v"; done < <(grep '^wrk\.' "$STATE/wrk-append-one.txt")
  gk checkpoints --prefix ap-notok --convs "$APPEND_CONVS" --seconds "$DURATION"
}

measure_sizes() {
  say "compaction range sizes $SIZES (dry runs on one $BIG_TURNS-turn conversation)"
  put big_turns "$BIG_TURNS"
  put size_reps "$SIZE_REPS"
  gk bigconv --conv big-0 --turns "$BIG_TURNS"
  local size i sql=$STATE/sizes.sql n p50 p99
  for size in ${SIZES//,/ }; do
    for ((i = 0; i <= SIZE_REPS; i++)); do select_sql big-0 $((size - 1)); done >"$sql"
    # The first of SIZE_REPS + 1 is the warm-up.
    read -r n p50 p99 _ _ < <(timed_selects "$sql" | tail -n +2 | stats)
    put "size_${size}_sel_p50_ms" "$p50"
  done
  gk sizes --conv big-0 --sizes "$SIZES" --reps "$SIZE_REPS"
  rss_phase sizes
}

measure_stall() {
  say "stall: reconstruct at $STALL_CONNS connections, alone and while $STALL_BATCH-turn token-less batches are appended"
  put stall_conns "$STALL_CONNS"
  put stall_s "$STALL_SECONDS"
  run_wrk stall_base "$STALL_CONNS" 1 "$STALL_SECONDS"
  gk appendloop --prefix stall --batch "$STALL_BATCH" --seconds "$STALL_SECONDS" --max 100 &
  APPENDER_PID=$!
  sleep 0.5
  run_wrk stall_load "$STALL_CONNS" 1 "$STALL_SECONDS"
  wait "$APPENDER_PID"
  APPENDER_PID=""
  rss_phase stall
}

measure_rss() {
  say "memory"
  put rss_end_mib "$(mib "$(status_kib VmRSS)")"
}

# Other work on the machine may restart the shared Postgres (fault-injection tests do): say so.
check_disturbance() {
  local now
  now=$(pg -d postgres -Atc "SELECT pg_postmaster_start_time()")
  if [[ $now != "$PG_STARTED" ]]; then
    put disturbed "Postgres restarted during the run (now up since $now): figures measured around then are not trustworthy"
    echo "load.sh: WARNING: Postgres was restarted during the run (up since $now)" >&2
  fi
}

measure_search() {
  say "search: recall on real sessions, latency in a 10,000-turn conversation and tenant-wide"
  if [[ $(curl -s -o /dev/null -w '%{http_code}' -H "authorization: Bearer $KEY" "$URL/v1/search?q=flight") == 404 ]]; then
    echo "  this binary has no search endpoint: skipped"
    return
  fi
  python3 "$ROOT/bench/search.py" --url "$URL" --key "$KEY" --data "$TAU_DATA" \
    | while IFS=$'\t' read -r k v; do put "$k" "$v"; done
  # The index's table: search_blocks (a row per run of turns), or turn_search (a row per turn)
  # for a binary from before migration 0010.
  local t=search_blocks turns="sum(cardinality(tokens))"
  [[ $(pg -d "$BENCH_DB" -Atc "SELECT to_regclass('search_blocks') IS NULL") == t ]] && t=turn_search turns="count(*)"
  pg -d "$BENCH_DB" -c "VACUUM ANALYZE $t" >/dev/null
  put search_bytes_per_turn "$(pg -d "$BENCH_DB" -Atc "SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('$t')), pg_total_relation_size('$t'))::int8 / greatest($turns, 1) FROM $t")"
  put turns_bytes_per_turn "$(pg -d "$BENCH_DB" -Atc "SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('turns')), pg_total_relation_size('turns'))::int8 / greatest(count(*), 1) FROM turns")"
  rss_phase search
}

write_report() {
  put loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
  put wall_s "$SECONDS"
  say "report → $OUT"
  mkdir -p "$(dirname "$OUT")"
  python3 "$ROOT/bench/load.py" report --results "$RESULTS" --out "$OUT"
}

# ------------------------------------------------------------------ main

main() {
  echo "load.sh: scale $LOAD_SCALE, ${DURATION}s per throughput measurement, $SEED_CONVS conversations, working folder $STATE"
  install_tools
  build_service
  start_postgres
  start_service
  record_meta
  seed
  measure_reconstruct
  measure_replica_reads
  measure_appends
  measure_compactions
  measure_ceilings
  measure_sizes
  measure_stall
  measure_search
  measure_rss
  check_disturbance
  write_report
}

main "$@"
