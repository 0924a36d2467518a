#!/usr/bin/env bash
# Fidelity benchmark: does the gatekeeper's coverage hold on real agent sessions?
#
#   bench/fidelity/run.sh <path-to-gatekeeper-binary> [--sessions N] [--out results.json] [--jobs 2]
#                         [--label before] [--commit <sha>]
#
# Starts its own gatekeeper (free loopback port, fresh SQLite dir), plays the tau-bench sessions
# through three orchestrators and writes a results file (default bench/fidelity/results/latest.json).
# Then: python3 bench/fidelity/report.py results/before.json [results/after.json] (writes docs/fidelity.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
if [[ ! -x "$1" ]]; then
  echo "not an executable gatekeeper binary: $1" >&2
  exit 2
fi

python="$(command -v python3.11 || command -v python3)"
stamp="$venv/.requirements.sha256"
wanted="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]]; then
  echo "installing $here/requirements.txt into $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  echo "$wanted" > "$stamp"
fi

exec "$venv/bin/python" "$here/bench.py" "$@"
