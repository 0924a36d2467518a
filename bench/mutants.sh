#!/usr/bin/env bash
# Every mutant of the coverage core (.cargo/mutants.toml), in a scratch copy of the tree; the
# figure is in docs/mutation-testing.md. Hours on 2 cores: `--shard k/N` (passed through) splits
# it; extra arguments go to cargo mutants.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null 2>&1 || cargo install --locked cargo-mutants@27.1.0
cargo mutants --workspace --no-shuffle --profile mutants --output "${MUTANTS_OUT:-target/mutants}" "$@"
