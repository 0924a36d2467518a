#!/usr/bin/env bash
# Builds the container image on this machine and runs it as the sidecar pod of
# deploy/sidecar/deployment.yaml, with runc: exit 0 when every check holds, one `ok:` line each.
#
# No Docker engine and no registry here, so: the Dockerfile's runtime stage is built by buildah
# on a stand-in for distroless cc-debian12 (deploy/smoke/base.sh) with the release binary built
# on the host (BINARY_FROM=prebuilt), its config checked against the Dockerfile's
# (deploy/smoke/drift.py), exported to an OCI layout (skopeo), unpacked (umoci) and run by runc
# in a network namespace made here, beside a second container, the agent, using the image's
# `gatekeeper` CLI as the client over 127.0.0.1, as the pod's two containers would.
#
# Needs root, buildah, skopeo, umoci, runc, socat, iproute2 and curl (installed from Debian's
# packages when missing), the Postgres of .ci/run on 127.0.0.1:5432 and ../shared/data.
# GATEKEEPER_SMOKE_BINARY=<path> uses that release binary instead of building one;
# GATEKEEPER_SMOKE_KEEP=1 keeps the work directory.
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
cd "$(dirname "$0")/.."
smoke_start=$SECONDS
source deploy/smoke/lib.sh

[[ "$(id -u)" == 0 ]] || fail "run as root (network namespaces, runc)"
exec 9>/run/gatekeeper-smoke.lock
flock -n 9 || fail "another deploy/smoke.sh is running"

ns=gatekeeper-smoke veth_host=gks-host veth_pod=gks-pod host_ip=10.250.18.1 pod_ip=10.250.18.2
agent_key="smoke-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
shared_data="$(cd ../shared/data && pwd)"
conversation=airline-0-0
leftovers
work="$(mktemp -d /tmp/gatekeeper-smoke.XXXXXX)"
chmod 0755 "${work}"
trap cleanup EXIT
store=(--root "${work}/storage" --runroot "${work}/run" --storage-driver vfs)
image=localhost/gatekeeper:smoke base_image=localhost/distroless-cc-standin:smoke
memory_limit=$((256 * 1024 * 1024))

step "tools"
missing=()
for tool in buildah skopeo umoci runc socat curl ip; do command -v "${tool}" >/dev/null || missing+=("${tool}"); done
if ((${#missing[@]})); then
  packages=$(printf '%s\n' "${missing[@]}" | sed 's/^ip$/iproute2/' | tr '\n' ' ')
  # shellcheck disable=SC2086 # the package names are words on purpose
  apt-get install -y -qq ${packages} >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq ${packages} >/dev/null; }
fi
for tool in buildah skopeo umoci runc; do printf '%s: %s\n' "${tool}" "$("${tool}" --version | head -n 1)"; done

step "the release binary"
binary="${GATEKEEPER_SMOKE_BINARY:-}"
if [[ -z "${binary}" ]]; then
  cargo build --release --locked --bin gatekeeper
  binary="${CARGO_TARGET_DIR:-target}/release/gatekeeper"
fi
# As the Dockerfile's builder stage checks its binary.
"${binary}" serve --help | grep -q GATEKEEPER_LISTEN || fail "${binary} is not the gatekeeper"
ok "binary ${binary} ($(mib "$(stat -c %s "${binary}")"))"

step "the image: the Dockerfile's runtime stage on the stand-in base"
bash deploy/smoke/base.sh "${store[@]}" "${base_image}"
mkdir -p "${work}/context/prebuilt/usr/local/bin" "${work}/context/prebuilt/data"
install -m 0755 "${binary}" "${work}/context/prebuilt/usr/local/bin/gatekeeper"
version=$(awk -F'"' '/^version *=/ { print $2; exit }' Cargo.toml)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
build_args=(--build-arg "VERSION=${version}" --build-arg "REVISION=${revision}")
buildah "${store[@]}" bud --quiet --format docker --layers=false -f Dockerfile \
  --build-arg BINARY_FROM=prebuilt --build-arg "RUNTIME_IMAGE=${base_image}" "${build_args[@]}" \
  -t "${image}" "${work}/context" >/dev/null
ok "built ${image} from Dockerfile (BINARY_FROM=prebuilt, RUNTIME_IMAGE=${base_image})"

step "drift: the image's config is the Dockerfile's"
buildah "${store[@]}" inspect --type image "${image}" >"${work}/image.json"
buildah "${store[@]}" inspect --type image "${base_image}" >"${work}/base.json"
python3 deploy/smoke/drift.py Dockerfile "${work}/image.json" "${work}/base.json" "${build_args[@]}"
mapfile -t healthcheck < <(python3 -c 'import json, sys; [print(a) for a in json.load(open(sys.argv[1]))["Docker"]["config"]["Healthcheck"]["Test"][1:]]' "${work}/image.json")
mapfile -t entrypoint < <(python3 -c 'import json, sys; [print(a) for a in json.load(open(sys.argv[1]))["Docker"]["config"]["Entrypoint"]]' "${work}/image.json")

step "export (skopeo, OCI layout) and unpack (umoci)"
skopeo copy --quiet "containers-storage:[vfs@${work}/storage+${work}/run]${image}" "oci:${work}/oci:smoke"
umoci unpack --image "${work}/oci:smoke" "${work}/bundle" >/dev/null
rootfs="${work}/bundle/rootfs" umoci_config="${work}/bundle/config.json"
manifest=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"].split(":")[1])' "${work}/oci/index.json")
compressed=$(python3 -c 'import json, sys; print(sum(l["size"] for l in json.load(open(sys.argv[1]))["layers"]))' "${work}/oci/blobs/sha256/${manifest}")
unpacked=$(du -sb "${rootfs}" | cut -f1)
[[ "$(stat -c '%u:%g %a' "${rootfs}/usr/local/bin/gatekeeper")" == "0:0 755" ]] || fail "the binary is not root-owned 0755"
[[ "$(stat -c '%u:%g' "${rootfs}/data")" == "65532:65532" ]] || fail "/data is not owned by 65532"
[[ ! -e "${rootfs}/bin/sh" ]] || fail "the image has a shell"
ok "image size: $(mib "${compressed}") compressed layers, $(mib "${unpacked}") unpacked (binary $(mib "$(stat -c %s "${rootfs}/usr/local/bin/gatekeeper")"))"
ok "binary root-owned 0755, /data owned by 65532, no /bin/sh"

step "the pod's network namespace"
pod_network_up
ok "netns ${ns}: lo, and ${veth_pod} ${pod_ip} paired with ${veth_host} ${host_ip} on the host"

step "memory limit through runc's cgroup settings"
bundle "${work}/gks-probe" --memory "${memory_limit}" --cgroup gatekeeper-smoke/gks-probe -- "${entrypoint[@]}" --version
if runc run --bundle "${work}/gks-probe" gks-probe </dev/null >"${work}/probe.log" 2>&1; then
  ok "a container with linux.resources.memory.limit=${memory_limit} starts"
else
  echo "memory limit NOT applied: runc cannot set it on this machine: $(tail -n 1 "${work}/probe.log")"
  memory_limit=""
fi

step "the gatekeeper container, as deployment.yaml runs it (SQLite in /data)"
mkdir -p "${work}/data"
chown 65532:65532 "${work}/data"
pod_env=(--env GATEKEEPER_LISTEN=127.0.0.1:8080 --env GATEKEEPER_DATA_DIR=/data --env GATEKEEPER_LOG_FORMAT=json
  --env "GATEKEEPER_API_KEYS=agent:${agent_key}" --bind "${work}/data:/data")
t0=$(now_ms)
start_gatekeeper gks-gatekeeper-1 "${pod_env[@]}"
wait_ready
grep -q '"message":"database ready","backend":"Sqlite"' "${gk_log}" || fail "not on SQLite: $(cat "${gk_log}")"
ok "start to ready: $((ready_ms - t0)) ms (runc run to /readyz 200), on SQLite in /data"
pid=$(gk_pid)
sleep 2
ok "idle memory at start: VmRSS $(rss_kib "${pid}") KiB, cgroup $(mib "$(cgroup_memory_bytes "${pid}")")"

step "checks on the running container"
read -r _ ruid euid suid fsuid < <(grep '^Uid:' "/proc/${pid}/status")
[[ "${ruid}${euid}${suid}${fsuid}" == "65532655326553265532" ]] || fail "the service runs as uid ${ruid}/${euid}"
read -r _ rgid _ < <(grep '^Gid:' "/proc/${pid}/status")
[[ "${rgid}" == 65532 ]] || fail "gid ${rgid}"
[[ "$(awk '/^CapEff:/ { print $2 }' "/proc/${pid}/status")" == 0000000000000000 ]] || fail "the process holds capabilities"
ok "process uid 65532 (real, effective, saved, fs), gid 65532, no capabilities"
root_opts=$(awk '$5 == "/" { print $6 }' "/proc/${pid}/mountinfo" | tail -n 1)
[[ ",${root_opts}," == *,ro,* ]] || fail "the root filesystem is mounted ${root_opts}"
data_mount=$(awk '$5 == "/data" { print $4, $6 }' "/proc/${pid}/mountinfo" | tail -n 1)
[[ "${data_mount}" == "${work}/data rw,"* ]] || fail "/data is not the volume: ${data_mount}"
[[ -s "${work}/data/gatekeeper.db" ]] || fail "no SQLite file in the volume"
ok "root filesystem mounted ro; /data is the volume (${work}/data, rw) and holds gatekeeper.db"
if runc exec --env GATEKEEPER_DATA_DIR=/home/nonroot/data "${gk_id}" "${entrypoint[@]}" migrate >"${work}/ro.log" 2>&1; then
  fail "the service could write a database on the root filesystem"
fi
grep -qi 'read-only file system' "${work}/ro.log" || fail "writing to the root filesystem failed otherwise: $(cat "${work}/ro.log")"
runc exec --env GATEKEEPER_DATA_DIR=/data/probe "${gk_id}" "${entrypoint[@]}" migrate >"${work}/rw.log" 2>&1 \
  || fail "the volume is not writable: $(cat "${work}/rw.log")"
ok "inside: a database in /home/nonroot (the user's own directory) is refused: Read-only file system; one in /data is created"
runc exec "${gk_id}" "${healthcheck[@]}" || fail "the image's health check failed inside the container"
ok "the image's HEALTHCHECK (${healthcheck[*]}) exits 0 inside the container"
code=$(in_pod curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:8080/v1/conversations/${conversation}")
[[ "${code}" == 401 ]] || fail "a request without the key got ${code}"
ok "inside the pod, a request without the key is 401"

step "the agent container: the gatekeeper CLI over 127.0.0.1"
source deploy/smoke/agent.sh
agent_flow
ok "idle memory after the agent's work: VmRSS $(rss_kib "${pid}") KiB, cgroup $(mib "$(cgroup_memory_bytes "${pid}")")"
if [[ -n "${memory_limit}" ]]; then
  limit=$(cgroup_memory_limit "${pid}")
  [[ "${limit}" == "${memory_limit}" ]] || fail "the cgroup's limit is ${limit}"
  ok "memory limit 256 MiB in force: the container's cgroup limit is ${limit} bytes"
fi

step "SIGTERM drains an in-flight request and exits 0 within the drain timeout"
drain_check
before="${state}"

step "SQLite data survives a container restart"
t0=$(now_ms)
start_gatekeeper gks-gatekeeper-2 "${pod_env[@]}"
wait_ready
after=$(agent status "${conversation}" --json) || fail "after the restart the log has no ${conversation}"
[[ "$(summarise_state "${after}")" == "$(summarise_state "${before}")" ]] \
  || fail "after the restart: $(summarise_state "${after}"), before: $(summarise_state "${before}")"
agent reconstruct "${conversation}" "${covered_turn}" --json >"${work}/reconstruct-after.json"
cmp -s "${work}/reconstruct-before.json" "${work}/reconstruct-after.json" || fail "reconstruct answers differently after the restart"
drained=$(agent status drain --json) || fail "after the restart the log has no drained append"
drained=$(json "${drained}" 'd["next_id"]')
[[ "${drained}" == 10000 ]] || fail "the append drained at SIGTERM holds ${drained} turns after the restart"
ok "a new container on the same volume, ready in $((ready_ms - t0)) ms: ${conversation} $(summarise_state "${after}"), reconstruct byte-identical, the drained append's 10000 turns kept"
stop_gatekeeper
[[ "${gk_status}" == 0 ]] || fail "exit ${gk_status}"

step "API keys are required to listen beyond loopback"
start_gatekeeper gks-nokeys --env GATEKEEPER_DATA_DIR=/data --bind "${work}/data:/data"
wait_exit 20
[[ "${gk_status}" != 0 ]] || fail "the image's defaults (GATEKEEPER_LISTEN=0.0.0.0:8080) started without keys"
grep -q 'no API keys' "${gk_log}" || fail "refused, but not for the keys: $(cat "${gk_log}")"
ok "the image's own listen address (0.0.0.0:8080) without keys: exit ${gk_status}, \"$(grep -o 'no API keys[^;]*' "${gk_log}" | head -n 1)\""
start_gatekeeper gks-gatekeeper-3 --env GATEKEEPER_DATA_DIR=/data --env "GATEKEEPER_API_KEYS=agent:${agent_key}" --bind "${work}/data:/data"
wait_ready
code=$(curl -s -o /dev/null -w '%{http_code}' "http://${pod_ip}:8080/v1/conversations/${conversation}")
[[ "${code}" == 401 ]] || fail "from the host without the key: ${code}"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${agent_key}" "http://${pod_ip}:8080/v1/conversations/${conversation}")
[[ "${code}" == 200 ]] || fail "from the host with the key: ${code}"
ok "with a key on 0.0.0.0:8080, from outside the pod (${pod_ip}): 401 without it, 200 with it"
stop_gatekeeper

step "Postgres mode against the host's Postgres"
postgres_check

step "the health check fails when nothing answers"
bundle "${work}/gks-unhealthy" -- "${healthcheck[@]}"
if runc run --bundle "${work}/gks-unhealthy" gks-unhealthy </dev/null >/dev/null 2>&1; then
  fail "the health check passed with no service in the pod"
fi
ok "the image's HEALTHCHECK exits non-zero in a pod where no gatekeeper runs"

step "all checks passed"
