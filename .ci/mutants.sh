#!/usr/bin/env bash
# One shard of the coverage core's mutants (.cargo/mutants.toml), one of the flows'
# (.cargo/mutants-flows.toml) and one of token counting's (.cargo/mutants-tokens.toml): shard k
# of N, k rotating with the commit count, so consecutive CI runs test different mutants and N
# runs test them all. Fails when a mutant is missed (no test fails on it) or times out. The
# whole sets: bench/mutants.sh core, bench/mutants.sh flows, bench/mutants.sh tokens.
set -euo pipefail
cd "$(dirname "$0")/.."
shards="${MUTANTS_SHARDS:-100}"
shard="${MUTANTS_SHARD:-$(( $(git rev-list --count HEAD) % shards ))}"
if ! command -v cargo-mutants >/dev/null 2>&1; then
  cargo install --locked --quiet cargo-mutants@27.1.0
fi
out="${TMPDIR:-/tmp}/gatekeeper-mutants"
rm -rf "$out" "$out-flows" "$out-tokens"
status=0
report() { # output folder: prints what was missed or timed out
  for kind in missed timeout; do
    if [[ -s "$1/mutants.out/$kind.txt" ]]; then echo "$kind:"; cat "$1/mutants.out/$kind.txt"; fi
  done
}
# In place: CI's clone is its own. The baseline is skipped: the test steps before this one ran
# the same tests unmutated.
echo "== mutants of the coverage core: shard $shard of $shards"
# The mutants profile builds the core's few dependencies once.
cargo mutants --workspace --in-place --no-shuffle --profile mutants --baseline skip --timeout 300 --shard "$shard/$shards" --output "$out" || status=$?
report "$out"
echo "== mutants of the flows: shard $shard of $shards"
# The dev profile: the test step built these binaries already, so a mutant rebuilds one crate.
# On SQLite, as that step ran them.
env -u DATABASE_URL GATEKEEPER_TEST_BACKEND=sqlite cargo mutants --config .cargo/mutants-flows.toml -p gatekeeper --in-place --no-shuffle --baseline skip --timeout 120 --shard "$shard/$shards" --output "$out-flows" || status=$?
report "$out-flows"
echo "== mutants of token counting: shard $shard of $shards"
# Its own crate and tests (about 2 of its mutants a shard); a failing proptest case kills the
# mutant, so it is not shrunk for long.
PROPTEST_MAX_SHRINK_ITERS=32 cargo mutants --config .cargo/mutants-tokens.toml -p gatekeeper-tokens --in-place --no-shuffle --baseline skip --timeout 120 --shard "$shard/$shards" --output "$out-tokens" || status=$?
report "$out-tokens"
# In place means the tree must be as committed again before the next step builds it.
git diff --quiet -- crates src || { echo "cargo mutants left the tree changed"; git checkout -- crates src; exit 1; }
exit "$status"
