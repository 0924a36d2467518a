#!/usr/bin/env bash
# Every mutant of one scope, in a scratch copy of the tree; the figures are in
# docs/mutation-testing.md. `bench/mutants.sh core` (the default): the coverage core
# (.cargo/mutants.toml), about 75 minutes here. `bench/mutants.sh flows`: the request flows
# (.cargo/mutants-flows.toml), about 50 minutes; `bench/mutants.sh replicas`: the flows' replica
# routing, against the streaming-replica fault test (Postgres up); `bench/mutants.sh reconstructs`:
# reconstruct's batched lookups on Postgres (Postgres up); `bench/mutants.sh search-index`:
# the Postgres search index in blocks (Postgres up); `bench/mutants.sh term-counts`: the
# Postgres term counts in packed rows (Postgres up); `bench/mutants.sh verdicts`: a Postgres
# checkpoint's per-turn reason codes (Postgres up); `bench/mutants.sh tokens`: token counting
# (.cargo/mutants-tokens.toml), a few minutes. `--shard k/N` splits a run;
# extra arguments go to cargo mutants.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null 2>&1 || cargo install --locked cargo-mutants@27.1.0
# The tests read the shared data at ../shared, which the scratch copy does not have beside it.
export TAU_BENCH_DATA="${TAU_BENCH_DATA:-$(cd .. && pwd)/shared/data/tau-bench-airline.jsonl.gz}"
scope="${1:-core}"
[[ $# -gt 0 ]] && shift
case "$scope" in
  core) args=(--workspace) ;;
  flows) args=(--config .cargo/mutants-flows.toml -p gatekeeper --timeout 120) ;;
  replicas) args=(--config .cargo/mutants-replicas.toml -p gatekeeper --timeout 300) ;;
  tokens)
    # A failing case kills the mutant; shrinking it to the smallest only costs time.
    export PROPTEST_MAX_SHRINK_ITERS="${PROPTEST_MAX_SHRINK_ITERS:-32}"
    args=(--config .cargo/mutants-tokens.toml -p gatekeeper-tokens --timeout 120) ;;
  reconstructs)
    export GATEKEEPER_TEST_BACKEND=postgres
    export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
    args=(--config .cargo/mutants-reconstructs.toml -p gatekeeper --timeout 60) ;;
  search-index)
    export GATEKEEPER_TEST_BACKEND=postgres
    export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
    args=(--config .cargo/mutants-search-index.toml -p gatekeeper --timeout 300) ;;
  term-counts)
    export GATEKEEPER_TEST_BACKEND=postgres
    export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
    args=(--config .cargo/mutants-term-counts.toml -p gatekeeper --timeout 120) ;;
  verdicts)
    export GATEKEEPER_TEST_BACKEND=postgres
    export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
    args=(--config .cargo/mutants-verdicts.toml -p gatekeeper --timeout 120) ;;
  *) echo "usage: bench/mutants.sh [core|flows|replicas|reconstructs|search-index|term-counts|verdicts|tokens] [cargo mutants arguments]" >&2; exit 2 ;;
esac
cargo mutants "${args[@]}" --no-shuffle --profile mutants --output "${MUTANTS_OUT:-target/mutants-$scope}" "$@"
