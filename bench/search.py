#!/usr/bin/env python3
"""Search benchmark (issue 14): does a turn's distinctive token find that turn, and how fast.

  * recall: the 200 tau-bench conversations joined into sessions of 400+ turns (as the
    fidelity benchmark joins them; no turn twice). For every turn, its distinctive token (an
    oracle of this script's own: the token of 3+ characters held by the fewest turns of the
    session, the longest of those; the service's stop words left out) is searched for in the session with limit=3. Reported: the
    share of turns found among those 3, over the turns whose token at most 3 turns hold (the
    goal's population: a token that can single a turn out) and over every turn;
  * latency within a conversation: a 10,000-turn conversation of real turns (the 200 joined,
    and again from the start), its turns' tokens and common words;
  * latency tenant-wide (`/v1/search`): the same queries across every conversation of the
    tenant (after load.sh's seed: about 1M turns).
Prints `key<TAB>value` lines (load.sh records them). Standard library only.

  python3 bench/search.py --url URL --key KEY --data tau.jsonl.gz [--sample 1000]
"""

import argparse
import gzip
import json
import os
import random
import re
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import Api, percentile, tau_text  # noqa: E402

PREFIX = os.environ.get("SEARCH_PREFIX", "search")
CONVERSATION = f"{PREFIX}-10k"
TURNS = 10_000
# The oracle's tokens: runs of letters and digits, joined by identifier punctuation, lowercased.
TOKEN = re.compile(r"[0-9a-z]+(?:[_./:@-][0-9a-z]+)*")
COMMON = ["flight", "reservation", "cancel", "refund", "baggage", "economy"]


def service_stop_words():
    """The service's documented stop-word list (crates/coverage/src/derive/stop_words.rs): stop words
    are never indexed, so a turn whose only rare words are stop words has no token to find it
    by. The oracle shares this list and nothing else."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = open(os.path.join(root, "crates/coverage/src/derive/stop_words.rs")).read()
    listed = source[source.index("const STOP_WORDS"):]
    return set(re.findall(r'"([^"]+)"', listed[: listed.index("];")]))


STOP = service_stop_words()


def tokens(text):
    return {t for t in TOKEN.findall(text.lower()) if len(t) >= 3 and t not in STOP}


def real_sessions(path, at_least=400):
    """The tau-bench conversations in file order, joined into sessions of 400+ turns."""
    sessions, current = [], []
    for row in (json.loads(line) for line in gzip.open(path, "rt")):
        current += [{"role": t["role"], "content": tau_text(t)} for t in row["turns"]
                    if tau_text(t).strip()]
        if len(current) >= at_least:
            sessions.append(current)
            current = []
    if current:
        sessions.append(current)
    return sessions


def append(api, conversation, turns):
    for i in range(0, len(turns), 500):
        api.expect("POST", f"/v1/conversations/{conversation}/turns",
                   json.dumps({"turns": turns[i:i + 500]}).encode(), (200, 201))


def distinctive(contents):
    """Per turn, its token held by the fewest turns (the longest of those), or None."""
    df = {}
    per_turn = [tokens(c) for c in contents]
    for ts in per_turn:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    best = [min(ts, key=lambda t: (df[t], -len(t), t)) if ts else None for ts in per_turn]
    return [(t, df[t]) if t else None for t in best]


def timed_get(api, path):
    start = time.perf_counter()
    status, body = api.request("GET", path)
    return status, body, (time.perf_counter() - start) * 1000


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--sample", type=int, default=1000)
    p.add_argument("--tenant-queries", type=int, default=500)
    a = p.parse_args()
    api = Api(a.url, a.key)
    rnd = random.Random(14)

    sessions = real_sessions(a.data)
    found_rare, rare, found_all, every, refused = 0, 0, 0, 0, 0
    for n, session in enumerate(sessions):
        name = f"{PREFIX}-session-{n}"
        append(api, name, session)
        for i, o in enumerate(distinctive([t["content"] for t in session])):
            if not o:
                continue
            token, df = o
            status, body = api.request(
                "GET", f"/v1/conversations/{name}/search?q={urllib.parse.quote(token)}&limit=3")
            hit = status == 200 and i in [h["turn"] for h in json.loads(body)["hits"]]
            refused += status != 200
            every += 1
            found_all += hit
            if df <= 3:
                rare += 1
                found_rare += hit

    real = [t for s in sessions for t in s]
    turns = [real[i % len(real)] for i in range(TURNS)]
    append(api, CONVERSATION, turns)
    oracle = distinctive([t["content"] for t in turns])
    candidates = [i for i, o in enumerate(oracle) if o]
    sample = rnd.sample(candidates, min(a.sample, len(candidates)))
    latencies = []
    for i in sample:
        q = urllib.parse.quote(oracle[i][0])
        _, _, ms = timed_get(api, f"/v1/conversations/{CONVERSATION}/search?q={q}&limit=3")
        latencies.append(ms)
    common = []
    for _ in range(5):
        for w in COMMON:
            _, _, ms = timed_get(api, f"/v1/conversations/{CONVERSATION}/search?q={w}&limit=10")
            common.append(ms)

    tenant, tenant_common = [], []
    for i in sample[: a.tenant_queries]:
        q = urllib.parse.quote(oracle[i][0])
        _, _, ms = timed_get(api, f"/v1/search?q={q}&limit=10")
        tenant.append(ms)
    for _ in range(5):
        for w in COMMON:
            _, _, ms = timed_get(api, f"/v1/search?q={w}&limit=10")
            tenant_common.append(ms)

    out = {
        "search_sessions": len(sessions),
        "search_recall_turns": every,
        "search_rare_turns": rare,
        "search_top3_rare_pct": round(100 * found_rare / max(rare, 1), 1),
        "search_top3_all_pct": round(100 * found_all / max(every, 1), 1),
        "search_refused": refused,
        "search_turns": TURNS,
        "search_sample": len(sample),
        "search_conv_p50_ms": round(percentile(latencies, 50), 2),
        "search_conv_p99_ms": round(percentile(latencies, 99), 2),
        "search_conv_common_p50_ms": round(percentile(common, 50), 2),
        "search_tenant_p50_ms": round(percentile(tenant, 50), 2),
        "search_tenant_p99_ms": round(percentile(tenant, 99), 2),
        "search_tenant_common_p50_ms": round(percentile(tenant_common, 50), 2),
    }
    for k, v in out.items():
        print(f"{k}\t{v}")


if __name__ == "__main__":
    main()
