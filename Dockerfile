# The gatekeeper as a container image: built with the Rust image, run on distroless as non-root.
#
#   docker build -t gatekeeper .
#   docker run --rm -p 127.0.0.1:8080:8080 -e GATEKEEPER_API_KEYS=ops:change-me-to-16+-chars gatekeeper
#
# Without DATABASE_URL the service keeps its SQLite file in the /data volume; set
# DATABASE_URL=postgres://… to use Postgres (see docker-compose.yml). Outside loopback the service
# refuses to start without API keys: set GATEKEEPER_API_KEYS or GATEKEEPER_API_KEYS_FILE.
#
# deploy/smoke.sh builds this file's runtime stage where no base image can be pulled
# (BINARY_FROM=prebuilt, RUNTIME_IMAGE=a local stand-in for distroless) and runs it as a pod.

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot
# Where the runtime stage takes the binary from: `builder` (compiled below, the default) or
# `prebuilt` (a release binary built beforehand, for hosts that cannot pull the Rust image:
# deploy/smoke.sh). Only the stage named here is built.
ARG BINARY_FROM=builder

# ---- build ----------------------------------------------------------------------------------
# The full (not -slim) image: the bundled SQLite is compiled by cc and needs gcc. No TLS libraries
# are needed: reqwest is built without TLS, and sqlx's TLS to Postgres is rustls on ring (compiled
# by cc too) with the Mozilla roots built in, so the runtime image needs no CA bundle either (mount
# the CA file that DATABASE_URL's sslrootcert names).
FROM ${RUST_IMAGE} AS builder
WORKDIR /build

# Dependencies first, against placeholder crates, so that this layer is rebuilt only when a
# manifest or the lock file changes. benches/ is copied because Cargo.toml names its targets, and
# the workspace members' manifests because cargo loads every member.
COPY Cargo.toml Cargo.lock ./
COPY benches ./benches
COPY crates/coverage/Cargo.toml crates/coverage/
COPY crates/tau-bench/Cargo.toml crates/tau-bench/
COPY crates/tokens/Cargo.toml crates/tokens/
COPY tests/support/Cargo.toml tests/support/
RUN mkdir -p src crates/coverage/src crates/tau-bench/src crates/tokens/src tests/support/src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs crates/coverage/src/lib.rs crates/tau-bench/src/lib.rs crates/tokens/src/lib.rs tests/support/src/lib.rs \
    && cargo build --release --locked --bin gatekeeper \
    && rm -rf src crates tests

# The real sources: the whole context that .dockerignore lets through (src/, crates/, migrations/, which
# are embedded in the binary at compile time, and any file the code includes). COPY keeps the
# files' own, older mtimes: touch the crate roots so that cargo rebuilds the crate instead of
# keeping the placeholder, and check that the binary is the real one.
COPY . .
RUN touch src/main.rs src/lib.rs crates/coverage/src/lib.rs crates/tau-bench/src/lib.rs crates/tokens/src/lib.rs \
    && cargo build --release --locked --bin gatekeeper \
    && ./target/release/gatekeeper serve --help > /tmp/serve-help.txt \
    && grep -q 'GATEKEEPER_LISTEN' /tmp/serve-help.txt \
    && install -D -m 0755 target/release/gatekeeper /out/usr/local/bin/gatekeeper \
    && install -d /out/data

# ---- prebuilt -------------------------------------------------------------------------------
# The same /out tree as the builder's, from a context whose prebuilt/ holds
# usr/local/bin/gatekeeper (`cargo build --release --locked --bin gatekeeper`) and an empty data/.
FROM scratch AS prebuilt
COPY prebuilt/ /out/

FROM ${BINARY_FROM} AS binary

# ---- run ------------------------------------------------------------------------------------
# glibc and libgcc_s only, no shell, no package manager; user nonroot is uid/gid 65532.
FROM ${RUNTIME_IMAGE}

ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gatekeeper" \
      org.opencontainers.image.description="Guards the compaction checkpoints of LLM agents: persists only the pointer set a summary really covers." \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# The binary stays root-owned (read-only for the service); /data is created owned by nonroot, and
# a new named volume mounted there starts with that ownership.
COPY --from=binary /out/usr/local/bin/gatekeeper /usr/local/bin/gatekeeper
COPY --from=binary --chown=65532:65532 /out/data /data

ENV GATEKEEPER_LISTEN=0.0.0.0:8080 \
    GATEKEEPER_DATA_DIR=/data \
    GATEKEEPER_LOG_FORMAT=json

USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080

# The image has no curl: the binary checks itself (GET http://127.0.0.1:8080/healthz, exit 0/1).
# Listening on another port? Set GATEKEEPER_HEALTHCHECK_URL to match.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/usr/local/bin/gatekeeper", "healthcheck"]

ENTRYPOINT ["/usr/local/bin/gatekeeper"]
CMD ["serve"]
