# The checks of deploy/smoke.sh that drive the service through the agent container (sourced after
# lib.sh): the agent's flow, the drain on SIGTERM, Postgres mode.

# json <document> <python expression over `d`>: one value of a JSON document (@path: of a file).
json() {
  python3 -c 'import json, sys
a = sys.argv[1]
d = json.load(open(a[1:], encoding="utf-8")) if a.startswith("@") else json.loads(a)
print(eval(sys.argv[2]))' "$1" "$2"
}

# What must survive a restart: the log's length and tokens, and the checkpoints.
summarise_state() {
  json "$1" '"next_id=%s total_tokens=%s checkpoints=%s latest_checkpoint=%s" % (d["next_id"], d["total_tokens"], d["checkpoints"], (d.get("latest_checkpoint") or {}).get("checkpoint_id"))'
}

# Append a tau-bench conversation, plan, compact what the plan allows with a summary that keeps
# every anchor the plan names, reconstruct a covered turn, take the context. Sets ${state}.
agent_flow() {
  local out plan from to proposal verdict outcome
  out=$(agent append "/shared/tau-bench-airline.jsonl.gz" --only "${conversation}" --json)
  local appended
  appended=$(json "${out}" 'sum(c["appended"] for c in d)')
  ((appended > 0)) || fail "append stored nothing: ${out}"
  ok "agent: append ${conversation} from tau-bench: ${appended} turns"
  plan=$(agent plan "${conversation}" --budget 400 --json)
  from=$(json "${plan}" 'd["from"]') to=$(json "${plan}" 'd["to"]')
  ok "agent: plan --budget 400: turns ${from}-${to}, advice $(json "${plan}" 'd["advice"]')"
  proposal=$(json "${plan}" 'json.dumps({"from": d["from"], "to": d["to"], "summary_budget": d["summary_budget"],
    "summary": "The customer and the agent discussed: " + "; ".join(", ".join(t["anchors"]) for t in d["turns"]) + "."})')
  verdict=$(agent compact "${conversation}" --json <<<"${proposal}")
  outcome=$(json "${verdict}" 'd["outcome"]')
  [[ "${outcome}" == accepted ]] || fail "compact: ${outcome}: ${verdict}"
  ok "agent: compact ${from}-${to} with the plan's anchors: ${outcome}, checkpoint $(json "${verdict}" 'd["checkpoint_id"]')"
  covered_turn="${from}"
  agent reconstruct "${conversation}" "${from}" --json >"${work}/reconstruct-before.json"
  [[ "$(json "@${work}/reconstruct-before.json" 'd["source"]')" == summary ]] \
    || fail "reconstruct ${from}: $(cat "${work}/reconstruct-before.json")"
  ok "agent: reconstruct ${from}: answered from the summary"
  out=$(agent context "${conversation}" --json)
  json "${out}" '[i for i in d["items"] if i.get("type") == "summary"][0]["text"]' | grep -q 'The customer and the agent discussed' \
    || fail "context holds no summary: ${out}"
  ok "agent: context: $(json "${out}" 'len(d["items"])') items, $(json "${out}" 'd["total_tokens"]') tokens, the summary in place of turns $(json "${out}" '[i for i in d["items"] if i["type"] == "summary"][0]["covers"]')"
  state=$(agent status "${conversation}" --json)
}

# A batch of real turns big enough to be in flight for a while: tau-bench turns, cycled.
drain_body() {
  python3 - "${shared_data}/tau-bench-airline.jsonl.gz" "$1" <<'EOF'
import gzip, itertools, json, sys
turns = []
for line in gzip.open(sys.argv[1], "rt", encoding="utf-8"):
    for t in json.loads(line)["turns"]:
        if t.get("content"):
            turns.append({"role": t["role"], "content": t["content"]})
batch = list(itertools.islice(itertools.cycle(turns), int(sys.argv[2])))
print(json.dumps({"turns": batch}))
EOF
}

# SIGTERM while a large append is being processed: the append completes (201), the service
# exits 0, sooner than the drain timeout, logging the drain.
drain_check() {
  local drain_secs=25 turns=10000 t_sent t_sig t_done code
  drain_body "${turns}" >"${work}/drain.json"
  t_sent=$(now_ms)
  in_pod curl -s -o "${work}/drain-answer.json" -w '%{http_code}' -H "Authorization: Bearer ${agent_key}" \
    -H 'content-type: application/json' --data-binary "@${work}/drain.json" \
    "http://127.0.0.1:8080/v1/conversations/drain/turns" >"${work}/drain-code" &
  local curl_pid=$!
  sleep 0.3
  t_sig=$(now_ms)
  stop_gatekeeper
  wait "${curl_pid}" || true
  t_done=$(now_ms)
  code=$(cat "${work}/drain-code")
  [[ "${code}" == 201 ]] || fail "the in-flight append got ${code}: $(cat "${work}/drain-answer.json")"
  [[ "$(json "@${work}/drain-answer.json" 'd["appended"]')" == "${turns}" ]] || fail "the in-flight append was cut short"
  grep -q 'shutting down: draining in-flight requests' "${gk_log}" || fail "no drain in the log"
  ! grep -q 'drain timeout passed' "${gk_log}" || fail "the drain timed out"
  ((t_sig - t_sent < t_done - t_sent)) || fail "the append finished before SIGTERM: no request was in flight"
  [[ "${gk_status}" == 0 ]] || fail "the container exited ${gk_status} on SIGTERM"
  ((stop_ms < drain_secs * 1000)) || fail "it took ${stop_ms} ms to stop, over the ${drain_secs}s drain timeout"
  ok "SIGTERM $((t_sig - t_sent)) ms into a ${turns}-turn append ($(mib "$(stat -c %s "${work}/drain.json")")): the append answered 201 $((t_done - t_sig)) ms later, exit 0 after ${stop_ms} ms (drain timeout ${drain_secs}s)"
}

# The pod's gatekeeper on the host's Postgres, reached over the veth pair: the host's Postgres
# listens on 127.0.0.1 only, so a relay on ${host_ip}:5432 forwards to it (nothing of the
# host's Postgres configuration changes).
postgres_check() {
  pg_db=gatekeeper_smoke
  psql -q -h 127.0.0.1 -U postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS ${pg_db} WITH (FORCE)"
  socat "TCP-LISTEN:5432,bind=${host_ip},reuseaddr,fork" TCP:127.0.0.1:5432 &
  relay_pid=$!
  mkdir -p "${work}/data-pg" && chown 65532:65532 "${work}/data-pg"
  start_gatekeeper gks-gatekeeper-pg --env GATEKEEPER_LISTEN=127.0.0.1:8080 --env "GATEKEEPER_API_KEYS=agent:${agent_key}" \
    --env "DATABASE_URL=postgres://postgres@${host_ip}:5432/${pg_db}?sslmode=disable" --bind "${work}/data-pg:/data"
  wait_ready
  grep -q '"message":"database ready","backend":"Postgres"' "${gk_log}" || fail "not on Postgres: $(cat "${gk_log}")"
  local out appended rows
  out=$(agent append "/shared/tau-bench-airline.jsonl.gz" --only "${conversation}" --json)
  appended=$(json "${out}" 'sum(c["appended"] for c in d)')
  agent reconstruct "${conversation}" 0 --json >"${work}/reconstruct-pg.json"
  [[ "$(json "@${work}/reconstruct-pg.json" 'd["source"]')" == live ]] || fail "reconstruct on Postgres: $(cat "${work}/reconstruct-pg.json")"
  rows=$(psql -h 127.0.0.1 -U postgres -d "${pg_db}" -Atc "SELECT count(*) FROM turns")
  [[ "${rows}" == "${appended}" ]] || fail "the agent appended ${appended} turns, the host's Postgres holds ${rows}"
  [[ -z "$(ls -A "${work}/data-pg")" ]] || fail "Postgres mode wrote to /data: $(ls -A "${work}/data-pg")"
  stop_gatekeeper
  [[ "${gk_status}" == 0 ]] || fail "exit ${gk_status} on SIGTERM (Postgres)"
  ok "Postgres: DATABASE_URL=postgres://postgres@${host_ip}:5432/${pg_db}: the agent appended ${appended} turns, the host's Postgres holds ${rows} rows, /data untouched, SIGTERM exit 0"
  kill "${relay_pid}" 2>/dev/null || true
  relay_pid=""
  psql -q -h 127.0.0.1 -U postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS ${pg_db} WITH (FORCE)"
  pg_db=""
}
