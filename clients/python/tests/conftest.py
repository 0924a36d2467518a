"""Fixtures: the real service binary on a free port with a fresh database, and real tau-bench text.

GATEKEEPER_BIN names the binary (default: the repository's target/debug/gatekeeper). Without
GATEKEEPER_TEST_DATABASE_URL each service gets a fresh SQLite file; with it (a Postgres server URL
such as postgres://postgres@127.0.0.1:5432), a fresh Postgres database that is dropped afterwards.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = os.environ.get("GATEKEEPER_BIN", str(REPO / "target" / "debug" / "gatekeeper"))
TAU = os.environ.get(
    "TAU_DATA", str(REPO.parent / "shared" / "data" / "tau-bench-airline.jsonl.gz")
)
PG_SERVER = os.environ.get("GATEKEEPER_TEST_DATABASE_URL")


@dataclass
class Service:
    url: str
    key: str
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _psql(sql: str) -> None:
    subprocess.run(["psql", "-q", "-d", f"{PG_SERVER}/postgres", "-c", sql], check=True)


@contextlib.contextmanager
def running_service(folder: Path, **extra_env: str) -> Iterator[Service]:
    """A fresh gatekeeper: its own port, its own database, one API key, `extra_env` on top."""
    port = free_port()
    key = f"pytest-{uuid.uuid4().hex}"
    env = dict(os.environ)
    env.update(GATEKEEPER_API_KEYS=f"pytest:{key}", GATEKEEPER_DATA_DIR=str(folder / "data"))
    env.update(extra_env)
    database = None
    if PG_SERVER:
        database = f"gk_py_{uuid.uuid4().hex[:12]}"
        env["DATABASE_URL"] = f"{PG_SERVER}/{database}"
    else:
        env.pop("DATABASE_URL", None)
    log = folder / f"service-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [BIN, "serve", "--listen", f"127.0.0.1:{port}"], env=env, stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield Service(url, key, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        text = log.read_text(errors="replace")
        if database:
            _psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        assert "panicked" not in text, f"the service panicked:\n{text}"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with running_service(tmp_path) as s:
        yield s


def tau_conversation(index: int) -> list[dict]:
    """A real tau-bench airline conversation as turns of {role, content, tool_calls?, name?}."""
    with gzip.open(TAU, "rt") as f:
        for i, line in enumerate(f):
            if i == index:
                return json.loads(line)["turns"]
    raise IndexError(index)


def _arguments(call: dict) -> str:
    args = call.get("arguments")
    return args if isinstance(args, str) else json.dumps(args, separators=(",", ":"))


def tau_turns(index: int) -> list[dict]:
    """The same conversation as the service's turns ({role, content}), tool calls written out as
    `name(arguments)` the way `gatekeeper append` does, empty turns left out."""
    turns = []
    for t in tau_conversation(index):
        text = t.get("content") or ""
        if not text and t.get("tool_calls"):
            text = "\n".join(f"{c.get('name') or ''}({_arguments(c)})" for c in t["tool_calls"])
        if text.strip():
            turns.append({"role": t["role"], "content": text})
    return turns
