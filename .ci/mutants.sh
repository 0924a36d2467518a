#!/usr/bin/env bash
# One shard of the coverage core's mutants (.cargo/mutants.toml): shard k of N, k rotating with
# the commit count, so consecutive CI runs test different mutants and N runs test them all. Fails
# when a mutant is missed (no test fails on it) or times out. The whole set: bench/mutants.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
shards="${MUTANTS_SHARDS:-100}"
shard="${MUTANTS_SHARD:-$(( $(git rev-list --count HEAD) % shards ))}"
if ! command -v cargo-mutants >/dev/null 2>&1; then
  cargo install --locked --quiet cargo-mutants@27.1.0
fi
out="${TMPDIR:-/tmp}/gatekeeper-mutants"
rm -rf "$out"
echo "== mutants: shard $shard of $shards"
# In place: CI's clone is its own. The mutants profile builds the core's few dependencies once.
status=0
# The baseline is skipped: the test step before this one ran the same tests unmutated.
cargo mutants --workspace --in-place --no-shuffle --profile mutants --baseline skip --timeout 300 --shard "$shard/$shards" --output "$out" || status=$?
for kind in missed timeout; do
  if [[ -s "$out/mutants.out/$kind.txt" ]]; then echo "$kind:"; cat "$out/mutants.out/$kind.txt"; fi
done
# In place means the tree must be as committed again before the next step builds it.
git diff --quiet -- crates || { echo "cargo mutants left crates/ changed"; git checkout -- crates; exit 1; }
exit "$status"
