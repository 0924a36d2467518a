#!/usr/bin/env bash
# The Python client (clients/python): its generated half regenerated from openapi.yaml and
# compared, then its tests (the facade, the LangChain middleware, the Agents SDK session) against
# the service binary on fresh SQLite files, then on fresh Postgres databases (and on Python 3.10
# where the machine has it), then the offline
# example against a service started the README's way.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${TMPDIR:-/tmp}/gatekeeper-python-client-venv"
constraints=clients/python/ci-constraints.txt
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet -c "$constraints" openapi-python-client ruff
"$venv/bin/pip" install --quiet -c "$constraints" "./clients/python[langchain,openai-agents,test]"

OPENAPI_PYTHON_CLIENT="$venv/bin/openapi-python-client" clients/python/generate.sh --check
(cd clients/python && "$venv/bin/ruff" check . && "$venv/bin/ruff" format --check .)

cargo build --quiet --bin gatekeeper
export GATEKEEPER_BIN="$PWD/target/debug/gatekeeper" TAU_DATA="$PWD/../shared/data/tau-bench-airline.jsonl.gz"

echo "== Python client tests on SQLite"
(cd clients/python && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)
echo "== Python client tests on Postgres"
(cd clients/python && GATEKEEPER_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432 \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)

# The oldest Python the package supports, where the machine has it (pyenv): what pip resolves for
# 3.10 (LangChain's newest releases need 3.11), on SQLite.
py310=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10.*/bin/python3.10 2>/dev/null | tail -n 1 || true)
[[ -n "$py310" ]] || py310=$(command -v python3.10 || true)
if [[ -n "$py310" ]] && "$py310" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then
  echo "== Python client tests on Python 3.10 (SQLite)"
  venv310="${TMPDIR:-/tmp}/gatekeeper-python-client-venv310"
  [[ -x "$venv310/bin/python" ]] || "$py310" -m venv "$venv310"
  "$venv310/bin/pip" install --quiet "./clients/python[langchain,openai-agents,test]"
  (cd clients/python && "$venv310/bin/python" -m pytest -q -p no:cacheprovider tests)
else
  echo "== no Python 3.10 here: the 3.10 run is skipped"
fi

echo "== the offline example"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data=$(mktemp -d)
GATEKEEPER_DATA_DIR="$data" "$GATEKEEPER_BIN" serve --listen "127.0.0.1:$port" >"$data/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
status=0
GATEKEEPER_URL="http://127.0.0.1:$port" "$venv/bin/python" clients/python/examples/langchain_tau.py \
  >"$data/example.out" || status=$?
kill "$pid"; wait "$pid" || true
head -20 "$data/example.out"
grep -Eq "^(accepted|narrowed|partial) " "$data/example.out" || { echo "the example printed no verdict"; status=1; }
rm -rf "$data"
exit "$status"
