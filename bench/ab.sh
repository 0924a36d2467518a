#!/usr/bin/env bash
# Interleaved A/B of two gatekeeper binaries on one workload, for differences a single full
# bench/load.sh run does not separate from this machine's drift.
#
#   bench/ab.sh MODE BIN_A BIN_B [ROUNDS]
#
# MODE: dry      50 dry-run proposals over one 2,000-turn conversation a round (p50)
#       compact  60 persisted proposals over [0, 1999] of fresh conversations a round (p50);
#                every round's conversations are appended first, then VACUUM ANALYZE, so the
#                proposals do not share the machine with autovacuum or the appends
#       append   60 × 2,000 turns without client token counts a round (turns/s)
#       append-given  the same with the client's token counts and anchors (load.sh's appends
#                with client counts)
#       one      single-turn appends over 1,000 conversations, wrk -c64 for 20 s a round
#                (requests/s; load.sh's single-turn ceiling)
#       checkpoints  persisted 100-turn checkpoints, 4 clients over 60 fresh 2,000-turn
#                conversations a round (checkpoints/s; load.sh's checkpoint ceiling), appended
#                and VACUUM ANALYZEd first as for compact
# Each binary gets its own fresh database (gk_ab_a, gk_ab_b, dropped at the end) and port;
# rounds alternate A, B, A, B… and each line also gives the service's CPU per request or per
# turn (user + system, /proc/PID/stat), which varies less than latency on a shared machine.
# Uses load.py's bodies: a template.json from LOAD_TEMPLATE, or made by BIN_A's service.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:?usage: bench/ab.sh dry|compact|append|append-given|one|checkpoints BIN_A BIN_B [ROUNDS]}
BINS=("${2:?BIN_A}" "${3:?BIN_B}")
ROUNDS=${4:-5}
PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
TAU_DATA=${TAU_DATA:-$ROOT/../shared/data/tau-bench-airline.jsonl.gz}
KEY=ab-bench-key-0123456789
STATE=$(mktemp -d /tmp/gatekeeper-ab.XXXXXX)
PIDS=()
SIDES=(a b)   # binary i runs as side SIDES[i]: database gk_ab_<side>, working folder <side>

pg() { PGOPTIONS="-c client_min_messages=warning" psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -X -q "$@"; }
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for x in a b; do pg -c "DROP DATABASE IF EXISTS gk_ab_$x" 2>/dev/null || true; done
  rm -rf "$STATE"
}
trap cleanup EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

PORTS=()
for i in 0 1; do
  x=${SIDES[$i]}
  pg -c "DROP DATABASE IF EXISTS gk_ab_$x" -c "CREATE DATABASE gk_ab_$x"
  port=$(free_port)
  DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/gk_ab_$x" GATEKEEPER_LISTEN="127.0.0.1:$port" \
    GATEKEEPER_API_KEYS="bench:$KEY" GATEKEEPER_LOG=warn "${BINS[$i]}" serve >"$STATE/$x.log" 2>&1 &
  PIDS+=($!)
  PORTS+=("$port")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$STATE/$x.log"; exit 1; }
  mkdir -p "$STATE/$x"
done
gk() { python3 "$ROOT/bench/load.py" --url "http://127.0.0.1:${PORTS[$1]}" --key "$KEY" --state "$STATE/$2" "${@:3}" >/dev/null 2>&1; }
# one_wrk I SIDE SECONDS: single-turn appends from SIDE/one.tsv; wrk's figures in SIDE/wrk.txt.
one_wrk() {
  wrk -t2 -c64 -d"${3}s" --timeout 10s -H "authorization: Bearer $KEY" -s "$ROOT/bench/requests.lua" \
    "http://127.0.0.1:${PORTS[$1]}" -- "$STATE/$2/one.tsv" >"$STATE/$2/wrk.txt"
}
wrk_figure() { awk -v k="wrk.$2" '$1 == k { printf "%.0f", $2 }' "$STATE/$1/wrk.txt"; }
result() { printf "%.${3:-2}f" "$(grep "^$2	" "$STATE/$1/results.tsv" | tail -n1 | cut -f2)"; }

if [[ -n ${LOAD_TEMPLATE:-} ]]; then
  cp "$LOAD_TEMPLATE" "$STATE/a/template.json"
else
  gk 0 a template --data "$TAU_DATA"
fi
cp "$STATE/a/template.json" "$STATE/b/template.json"

case $MODE in
  dry) for i in 0 1; do x=${SIDES[$i]}
         gk "$i" $x bigconv --conv big-0 --turns 2000
         gk "$i" $x sizes --conv big-0 --sizes 2000 --reps 20; done ;;   # warm-up
  compact|checkpoints) for r in $(seq "$ROUNDS"); do for i in 0 1; do x=${SIDES[$i]}
             gk "$i" $x append --label w$r --prefix r$r --convs 60 --turns 2000; done; done
           for x in a b; do pg -d gk_ab_$x -c "VACUUM ANALYZE"; done
           pg -c CHECKPOINT ;;
  append|append-given) for i in 0 1; do x=${SIDES[$i]}
            gk "$i" $x append --label w --prefix w --convs 10 --turns 2000 --no-tokens; done ;;   # warm-up
  one) command -v wrk >/dev/null || { echo "one needs wrk (apt-get install wrk)" >&2; exit 2; }
       for i in 0 1; do x=${SIDES[$i]}
         gk "$i" $x onerequests --prefix one --convs 1000 --out "$STATE/$x/one.tsv"
         one_wrk "$i" $x 3; done ;;   # warm-up
  *) echo "unknown mode $MODE: dry, compact, append, append-given, one or checkpoints" >&2; exit 2 ;;
esac

echo "$MODE: A = ${BINS[0]}, B = ${BINS[1]}, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  line="round $r"
  for i in 0 1; do
    x=${SIDES[$i]}
    before=$(cpu_ticks "${PIDS[$i]}")
    case $MODE in
      dry) gk "$i" $x sizes --conv big-0 --sizes 2000 --reps 50
           figure="p50 $(result $x size_2000_cmp_p50_ms) ms"; per=50 unit=request ;;
      compact) gk "$i" $x compact --label c$r --prefix r$r --convs 60 --turns-per-conv 2000 --range 2000
               figure="p50 $(result $x c${r}_p50_ms) ms"; per=60 unit=request ;;
      append) gk "$i" $x append --label n$r --prefix n$r --convs 60 --turns 2000 --no-tokens
              figure="$(result $x n${r}_turns_per_s 0) turns/s"; per=120000 unit=turn ;;
      append-given) gk "$i" $x append --label g$r --prefix g$r --convs 60 --turns 2000
                    figure="$(result $x g${r}_turns_per_s 0) turns/s"; per=120000 unit=turn ;;
      one) one_wrk "$i" $x 20
           [[ $(wrk_figure $x errors) == 0 ]] || { echo "wrk saw errors on $x" >&2; cat "$STATE/$x/wrk.txt" >&2; exit 1; }
           figure="$(wrk_figure $x rps) requests/s"; per=$(wrk_figure $x requests) unit=request ;;
      checkpoints) gk "$i" $x checkpoints --prefix r$r --convs 60 --seconds 30
                   figure="$(result $x ceil_cp_per_s 0) checkpoints/s"; per=$(result $x ceil_cp_n 0) unit=checkpoint ;;
    esac
    ticks=$(($(cpu_ticks "${PIDS[$i]}") - before))
    cpu=$(python3 -c "print(f'{$ticks / $(getconf CLK_TCK) / $per * 1e6:.1f}')")
    line+=" | ${x^^}: $figure, service CPU $cpu µs/$unit"
  done
  echo "$line"
done
