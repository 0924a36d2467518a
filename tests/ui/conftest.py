"""Fixtures for the coverage map tests: the service .ci/ui.sh started (GATEKEEPER_URL, with the
API key GATEKEEPER_KEY), seeded here through the API with a real tau-bench conversation and a
10,000-turn one, and Debian's Chromium (CHROMIUM) driven by Playwright."""

import gzip
import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import sync_playwright

URL = os.environ["GATEKEEPER_URL"]
KEY = os.environ["GATEKEEPER_KEY"]
BIN = os.environ["GATEKEEPER_BIN"]
TAU = os.environ["TAU_DATA"]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def rest(method, path, body=None, key=KEY, url=URL):
    """(status, JSON answer) of one API request."""
    headers = {"accept": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def ok(method, path, body=None, **kw):
    status, answer = rest(method, path, body, **kw)
    assert 200 <= status < 300, (method, path, status, answer)
    return answer


def tau_records():
    with gzip.open(TAU, "rt") as f:
        return [json.loads(line) for line in f]


def text_of(turn):
    """A tau-bench turn's text as `gatekeeper append` sends it: its content, or its tool calls."""
    if turn.get("content") or not turn.get("tool_calls"):
        return turn.get("content") or ""
    return "\n".join(f"{c.get('name') or ''}({c['arguments'] if isinstance(c['arguments'], str) else json.dumps(c['arguments'], separators=(',', ':'))})" for c in turn["tool_calls"])


def propose(conversation, first, last, summary, tokens, **kw):
    """A proposal whose budget leaves the summary under the ceiling and short of the budget."""
    body = {"from": first, "to": last, "summary": summary.rstrip() + "\nThat is all.",
            "summary_budget": 2 * tokens + 100, "finish_reason": "stop", **kw}
    return ok("POST", f"/v1/conversations/{conversation}/compactions", body)


def turns_of(conversation, n, **kw):
    return [ok("GET", f"/v1/conversations/{conversation}/turns/{i}", **kw) for i in range(n)]


def truth(conversation, n, **kw):
    """What reconstruct answers for each turn: the service's own word on what the map must show."""
    return [ok("GET", f"/v1/conversations/{conversation}/reconstruct/{i}", **kw) for i in range(n)]


@pytest.fixture(scope="session")
def tau():
    """A real tau-bench conversation, appended with the CLI, then two checkpoints: one whose
    summary keeps only the even turns (narrowed), one that keeps all of its range; the last
    quarter stays live. Two turns are pinned: one in the first checkpoint's range, one live."""
    record = next(r for r in tau_records() if 16 <= len(r["turns"]) <= 40)
    name = record["conversation"]
    subprocess.run([BIN, "append", TAU, "--only", name], check=True, capture_output=True)
    n = ok("GET", f"/v1/conversations/{name}")["next_id"]
    pinned, pinned_live = 3, n - 2
    for t in (pinned, pinned_live):
        ok("PATCH", f"/v1/conversations/{name}/turns/{t}", {"pinned": True})
    turns = turns_of(name, n)
    a, b = n // 2, (3 * n) // 4
    kept = [t["content"] for t in turns[: a + 1] if t["id"] % 2 == 0 and t["id"] != pinned]
    first = propose(name, 0, a, "\n".join(kept), sum(t["tokens"] for t in turns[: a + 1]))
    assert first["outcome"] == "narrowed", first
    second = propose(name, a + 1, b, "\n".join(t["content"] for t in turns[a + 1 : b + 1]),
                     sum(t["tokens"] for t in turns[a + 1 : b + 1]))
    return {"name": name, "n": n, "turns": turns, "verdicts": [first, second], "pinned": pinned,
            "pinned_live": pinned_live, "truth": truth(name, n)}


@pytest.fixture(scope="session")
def big():
    """10,000 real turns (the tau-bench conversations one after another, twice) in one conversation,
    one pinned, 19 checkpoints of 500 turns whose summaries keep three turns in four; the
    last 500 turns live."""
    name, n, texts = "ui-10000-turns", 10_000, []
    real = [{"role": t["role"], "content": text_of(t)} for r in tau_records() for t in r["turns"] if text_of(t).strip()]
    while len(texts) < n:  # the file holds about half as many: twice over
        texts += [dict(t) for t in real]
    texts = texts[:n]
    # With anchors given (the turn's two longest words) the debug build appends in seconds;
    # deriving them is what the tau-bench conversation above is for.
    for t in texts:
        t["anchors"] = sorted(set(re.findall(r"\w{4,}", t["content"])) or {"none"}, key=lambda w: (-len(w), w))[:2]
    tokens = []
    for i in range(0, n, 500):
        answer = ok("POST", f"/v1/conversations/{name}/turns", {"turns": texts[i : i + 500]})
        tokens += [t["tokens"] for t in answer["turns"]]
    ok("PATCH", f"/v1/conversations/{name}/turns/1234", {"pinned": True})
    verdicts = []
    for first in range(0, n - 500, 500):
        last = first + 499
        summary = "\n".join(texts[i]["content"] for i in range(first, last + 1) if i % 4)
        verdicts.append(propose(name, first, last, summary, sum(tokens[first : last + 1])))
    return {"name": name, "n": n, "texts": texts, "verdicts": verdicts}


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        # Debian's Chromium; as root it needs --no-sandbox.
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


class Watched:
    """A page whose console errors and uncaught exceptions are collected."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def log_in(self, path, state="ready"):
        """Opens `path` and answers the key prompt: the one 401 the protocol takes."""
        self.page.goto(URL + path)
        self.page.locator("#key-dialog[open]").wait_for()
        self.page.fill("#key-input", KEY)
        self.page.press("#key-input", "Enter")
        self.page.locator(f"body[data-state={state}]").wait_for()
        assert "401" in self.errors.pop(0), self.errors


@pytest.fixture
def watched(browser):
    w = Watched(browser)
    yield w
    w.context.close()


@pytest.fixture(scope="module")
def signed_in(browser):
    """One tab with the key entered once, reused by the module's tests (the key lives in the
    tab's session storage); no console error may appear after the login."""
    w = Watched(browser)
    w.log_in("/ui/")
    yield w
    w.context.close()


@pytest.fixture
def page(signed_in):
    yield signed_in.page
    assert signed_in.errors == [], signed_in.errors
