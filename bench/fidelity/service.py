"""A private gatekeeper instance (fresh data dir, free port) and a small JSON client for it."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Answer:
    status: int
    body: dict


class Client:
    """One keep-alive HTTP/1.1 connection; the benchmark makes tens of thousands of calls."""

    def __init__(self, base_url: str) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        self._host, self._port = parsed.hostname, parsed.port
        self._conn = http.client.HTTPConnection(self._host, self._port, timeout=60)

    def request(
        self, method: str, path: str, body: dict | None = None, idempotency_key: str | None = None
    ) -> Answer:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json"} if payload is not None else {}
        if idempotency_key:
            headers["idempotency-key"] = idempotency_key
        for attempt in range(3):
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                response = self._conn.getresponse()
                raw = response.read()
                break
            except (http.client.HTTPException, ConnectionError):
                # A dropped keep-alive connection: reconnect and resend. Appends carry explicit
                # ids and compactions an Idempotency-Key, so a resent request changes nothing twice.
                self._conn.close()
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=60)
                if attempt == 2:
                    raise
        data = json.loads(raw) if raw else {}
        if response.status >= 500:
            raise RuntimeError(f"{method} {path}: {response.status} {data}")
        return Answer(response.status, data)

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def post(self, path: str, body: dict, idempotency_key: str | None = None) -> Answer:
        return self.request("POST", path, body, idempotency_key)

    def close(self) -> None:
        self._conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class Instance:
    """`gatekeeper serve` on a free loopback port with its own SQLite file, stopped on exit."""

    def __init__(self, binary: str) -> None:
        self.binary = str(Path(binary).resolve())
        self.data_dir = tempfile.mkdtemp(prefix="fidelity-gk-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(self.data_dir, "gatekeeper.log")
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> "Instance":
        env = dict(
            os.environ,
            GATEKEEPER_LISTEN=f"127.0.0.1:{self.port}",
            GATEKEEPER_DATA_DIR=self.data_dir,
            GATEKEEPER_LOG="warn",  # every narrowed verdict logs a WARN: keep the file small
        )
        for name in ("DATABASE_URL", "GATEKEEPER_API_KEYS", "GATEKEEPER_API_KEYS_FILE"):
            env.pop(name, None)
        self._log = open(self.log_path, "wb")
        self._process = subprocess.Popen(
            [self.binary, "serve"], env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"gatekeeper exited with {self._process.returncode}; see {self.log_path}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/readyz")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"gatekeeper not ready after {timeout}s; see {self.log_path}")

    def __exit__(self, *exc) -> None:
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
        if exc[0] is None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        # After a failure the data dir (database and log) is kept for a look.
