# Helpers of deploy/smoke.sh (sourced): the pod's network namespace, containers run with runc,
# timing. Expects ${work}, ${rootfs}, ${umoci_config}, ${ns}, ${entrypoint[@]} from the caller.

ok() { printf 'ok: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '\n== %s (%ss)\n' "$1" "$((SECONDS - smoke_start))"; }
now_ms() { date +%s%3N; }

# The pod's network: a namespace with loopback up, and a veth pair to the host (host_ip on this
# side, pod_ip inside) so that the pod can reach the host's Postgres.
pod_network_up() {
  ip netns add "${ns}"
  ip -n "${ns}" link set lo up
  ip link add "${veth_host}" type veth peer name "${veth_pod}"
  ip link set "${veth_pod}" netns "${ns}"
  ip addr add "${host_ip}/30" dev "${veth_host}"
  ip link set "${veth_host}" up
  ip -n "${ns}" addr add "${pod_ip}/30" dev "${veth_pod}"
  ip -n "${ns}" link set "${veth_pod}" up
}

pod_network_down() {
  ip link del "${veth_host}" 2>/dev/null || true
  ip netns del "${ns}" 2>/dev/null || true
}

# Runs a command inside the pod's network, from the host (as a kubelet probe or a port-forward would).
in_pod() { ip netns exec "${ns}" "$@"; }

# bundle <dir> [bundle.py flags...] -- <args...>: a runc bundle on the shared read-only rootfs.
bundle() {
  local dir="$1"
  shift
  python3 deploy/smoke/bundle.py "${umoci_config}" "${dir}" "${rootfs}" "/var/run/netns/${ns}" "$@"
}

# start_gatekeeper <id> [bundle.py flags...]: the gatekeeper container, `serve` as in the pod
# spec, in the background; sets gk_id, gk_runc (the `runc run` process, whose exit status is the
# container's) and gk_log.
start_gatekeeper() {
  gk_id="$1"
  shift
  gk_log="${work}/${gk_id}.log"
  local flags=("$@")
  [[ -n "${memory_limit}" ]] && flags+=(--memory "${memory_limit}" --cgroup "gatekeeper-smoke/${gk_id}")
  bundle "${work}/${gk_id}" "${flags[@]}" -- "${entrypoint[@]}" serve
  runc run --bundle "${work}/${gk_id}" "${gk_id}" </dev/null >"${gk_log}" 2>&1 &
  gk_runc=$!
}

# wait_ready [timeout s]: until /readyz answers 200 inside the pod; sets ready_ms.
wait_ready() {
  local deadline=$((SECONDS + ${1:-60}))
  until in_pod curl -fsS -o /dev/null --max-time 1 http://127.0.0.1:8080/readyz 2>/dev/null; do
    kill -0 "${gk_runc}" 2>/dev/null || { cat "${gk_log}" >&2; fail "${gk_id} exited before it was ready"; }
    ((SECONDS < deadline)) || { cat "${gk_log}" >&2; fail "${gk_id} not ready within ${1:-60}s"; }
    sleep 0.02
  done
  ready_ms=$(now_ms)
}

# wait_exit <timeout s>: the container's exit status in gk_status; a container still running
# then is killed and fails the run.
wait_exit() {
  local deadline=$((SECONDS + $1))
  while kill -0 "${gk_runc}" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      runc kill "${gk_id}" KILL 2>/dev/null || true
      wait "${gk_runc}" || true
      fail "${gk_id} still running after $1s"
    fi
    sleep 0.1
  done
  gk_status=0
  wait "${gk_runc}" || gk_status=$?
}

gk_pid() { runc state "${gk_id}" | python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])'; }

# stop_gatekeeper: SIGTERM, then the container's exit status and how long it took (stop_ms).
stop_gatekeeper() {
  local t0
  t0=$(now_ms)
  runc kill "${gk_id}" TERM
  gk_status=0
  wait "${gk_runc}" || gk_status=$?
  stop_ms=$(($(now_ms) - t0))
}

# agent <args...>: one `gatekeeper` CLI command in a fresh agent container in the pod (the image's
# binary, run as the agent's client, as the Kubernetes manifest's agent container would), stdin
# passed through. The key and URL are what the manifest gives the agent.
agent_n=0
agent() {
  agent_n=$((agent_n + 1))
  local id="gks-agent-${agent_n}"
  bundle "${work}/${id}" --env "GATEKEEPER_URL=http://127.0.0.1:8080" --env "GATEKEEPER_KEY=${agent_key}" \
    --bind "${shared_data}:/shared:ro" -- "${entrypoint[@]}" "$@"
  runc run --bundle "${work}/${id}" "${id}"
}

# Memory the container holds: VmRSS of its process, and the cgroup's charge (v1 or v2).
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
cgroup_memory_bytes() {
  local path
  path=$(awk -F: '$2 == "memory" || ($1 == "0" && $2 == "") { print $3; exit }' "/proc/$1/cgroup")
  if [[ -f "/sys/fs/cgroup/memory${path}/memory.usage_in_bytes" ]]; then
    cat "/sys/fs/cgroup/memory${path}/memory.usage_in_bytes"
  elif [[ -f "/sys/fs/cgroup${path}/memory.current" ]]; then
    cat "/sys/fs/cgroup${path}/memory.current"
  fi
}
cgroup_memory_limit() {
  local path
  path=$(awk -F: '$2 == "memory" || ($1 == "0" && $2 == "") { print $3; exit }' "/proc/$1/cgroup")
  cat "/sys/fs/cgroup/memory${path}/memory.limit_in_bytes" 2>/dev/null || cat "/sys/fs/cgroup${path}/memory.max"
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# Removes the containers, network and cgroups a run leaves (this one's, or one that was killed).
leftovers() {
  local id
  for id in $(runc list -q 2>/dev/null | grep -E '^gks-' || true); do
    runc kill "${id}" KILL 2>/dev/null || true
    runc delete --force "${id}" 2>/dev/null || true
  done
  pod_network_down
  find /sys/fs/cgroup -depth -type d -name gatekeeper-smoke -exec rmdir {} + 2>/dev/null || true
}

# Everything this run made, also after a failure: leftovers, the relay, the database, ${work}.
cleanup() {
  leftovers
  [[ -n "${relay_pid:-}" ]] && kill "${relay_pid}" 2>/dev/null || true
  [[ -n "${pg_db:-}" ]] && psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS ${pg_db} WITH (FORCE)" 2>/dev/null || true
  if [[ -n "${GATEKEEPER_SMOKE_KEEP:-}" ]]; then echo "kept ${work}"; else rm -rf "${work}"; fi
}
