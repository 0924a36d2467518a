#!/usr/bin/env python3
"""HTTP side of bench/lock_hold.sh: how long a persisted compaction proposal holds the
conversation's write lock, as the service reports it in gatekeeper_write_lock_seconds.

Standard library only; the seed and the proposal bodies are bench/load.py's (imported from beside
this file), so the proposals are the same "persisted 2,000-turn proposals" load.sh times.

  seed      the 200 tau-bench conversations once (service-side counting, kept as the template),
            then `convs` conversations of `turns` template turns each, appended with the
            template's tokens and anchors (load.py's `template` and `append`)
  propose   `proposals` persisted proposals over [0, turns-1] from `clients` concurrent clients,
            spread evenly over the conversations in a seeded random order (so two clients
            sometimes want the same conversation's lock), then /metrics before and after: prints
            one summary line and a Markdown table
"""

import argparse
import collections
import concurrent.futures
import json
import os
import random
import statistics
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402  (bench/load.py: Api, the template, the bodies, percentiles)

METRIC = "gatekeeper_write_lock_seconds"
OPERATION = "propose"


def cmd_seed(a, api):
    ns = argparse.Namespace(data=a.data, state=a.state, clients=a.clients)
    load.cmd_template(ns, api)
    ns = argparse.Namespace(
        state=a.state,
        clients=a.clients,
        label="lock_append",
        prefix=a.prefix,
        convs=a.convs,
        turns=a.turns,
        batch=500,
        no_tokens=False,
        csv_dir=None,
        tenant="bench",
    )
    load.cmd_append(ns, api)


def bodies_for(a):
    """One body per conversation, exactly as load.py's `compact` builds it: a summary carrying the
    anchors of two turns in three of [0, turns-1], a budget far above the ceiling."""
    turns = load.flat_turns(load.load_template(a.state))
    n = len(turns)
    bodies = []
    for i in range(a.convs):
        start = (i * a.turns) % n
        seq = [turns[(start + j) % n] for j in range(a.turns)]
        summary = load.summary_of(seq[j]["anchors"] for j in range(a.turns) if j % 3 != 2)
        bodies.append((f"{a.prefix}-{i}", load.proposal(0, a.turns - 1, summary, False)))
    return bodies


def scrape(api):
    """The write-lock series for operation="propose": buckets {le: count}, quantiles {q: v}, sum, count."""
    _, data = api.expect("GET", "/metrics", None, (200,))
    out = {"buckets": {}, "quantiles": {}, "sum": None, "count": None}
    label = f'operation="{OPERATION}"'
    for line in data.decode().splitlines():
        if not line.startswith(METRIC) or label not in line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        labels = dict(
            kv.split("=", 1) for kv in name_labels.split("{", 1)[1].rstrip("}").split(",") if "=" in kv
        )
        labels = {k: v.strip('"') for k, v in labels.items()}
        v = float(value)
        if name == METRIC + "_bucket":
            out["buckets"][float(labels["le"])] = v
        elif name == METRIC + "_sum":
            out["sum"] = v
        elif name == METRIC + "_count":
            out["count"] = v
        elif name == METRIC and "quantile" in labels:
            out["quantiles"][float(labels["quantile"])] = v
    return out


def bucket_quantile(q, buckets):
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding rank q·n."""
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for b in bounds:
        c = buckets[b]
        if c >= rank:
            if b == float("inf"):
                return prev_bound  # above the highest finite bound: its lower edge, as Prometheus
            if c == prev_count:
                return b
            return prev_bound + (b - prev_bound) * (rank - prev_count) / (c - prev_count)
        prev_bound, prev_count = b, c
    return bounds[-1]


def ms(v):
    return "n/a" if v is None else f"{v * 1000:.2f} ms"


def cmd_propose(a, api):
    bodies = bodies_for(a)
    # Every conversation gets proposals/convs of them (the remainder to the first ones), in a
    # seeded random order shared by the clients: distinct conversations mostly, the same one now
    # and then, as agents on a shared service would.
    order = [i % a.convs for i in range(a.proposals)]
    random.Random(a.random_seed).shuffle(order)
    before = scrape(api)

    def one(i):
        conv, body = bodies[i]
        t0 = time.perf_counter()
        status, data = api.request("POST", load.compactions_path(conv), body)
        dt = time.perf_counter() - t0
        outcome = None
        if status in (200, 201):
            outcome = json.loads(data).get("outcome")
        elif a.verbose:
            load.log(f"{conv}: {status} {data[:200]!r}")
        return status, outcome, dt

    load.log(
        f"propose: {a.proposals} persisted proposals over [0, {a.turns - 1}] on {a.convs} conversations, "
        f"{a.clients} clients"
    )
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.clients) as pool:
        results = list(pool.map(one, order))
    wall = time.perf_counter() - t0
    after = scrape(api)

    statuses = collections.Counter(s for s, _, _ in results)
    outcomes = collections.Counter(o for _, o, _ in results if o)
    lat = [dt for _, _, dt in results]
    c50, c95, cmax = load.percentile(lat, 50), load.percentile(lat, 95), max(lat)

    # The server's side: the difference over this phase (the seed proposes nothing, so `before`
    # is normally empty). Quantiles of a summary cannot be subtracted: they are taken as read.
    count = sum_ = mean = p50 = p95 = None
    how = "n/a"
    if after["count"] is not None:
        count = after["count"] - (before["count"] or 0)
        sum_ = after["sum"] - (before["sum"] or 0)
        mean = sum_ / count if count else None
    if after["buckets"]:
        diff = {b: c - before["buckets"].get(b, 0) for b, c in after["buckets"].items()}
        p50, p95 = bucket_quantile(0.5, diff), bucket_quantile(0.95, diff)
        how = "estimated from histogram buckets (linear interpolation, as histogram_quantile)"
    elif after["quantiles"]:
        p50, p95 = after["quantiles"].get(0.5), after["quantiles"].get(0.95)
        how = "summary quantiles as exported" + (" (includes earlier samples)" if before["count"] else "")
    instrumented = count is not None

    st = " ".join(f"{k}:{v}" for k, v in sorted(statuses.items()))
    oc = " ".join(f"{k}:{v}" for k, v in sorted(outcomes.items())) or "none"
    lock = (
        f"write lock (server, {OPERATION}) n={count:.0f} mean {ms(mean)} p50 {ms(p50)} p95 {ms(p95)}"
        if instrumented
        else f"write lock (server): no {METRIC}{{operation=\"{OPERATION}\"}} in /metrics"
    )
    print()
    print(
        f"lock_hold: {len(results)} proposals ({a.clients} clients, {a.convs} convs x {a.turns} turns) in "
        f"{wall:.1f}s, status {st}, outcome {oc}; client p50 {ms(c50)} p95 {ms(c95)} max {ms(cmax)}; {lock}"
    )
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| proposals sent (clients × conversations × turns) | {len(results)} ({a.clients} × {a.convs} × {a.turns:,}) |")
    print(f"| HTTP statuses | {st} |")
    print(f"| outcomes | {oc} |")
    print(f"| wall time | {wall:.2f} s ({len(results) / wall:.1f} proposals/s) |")
    print(f"| client latency p50 / p95 / max | {ms(c50)} / {ms(c95)} / {ms(cmax)} |")
    print(f"| client latency mean | {ms(statistics.mean(lat))} |")
    if instrumented:
        print(f"| `{METRIC}{{operation=\"{OPERATION}\"}}` count | {count:.0f} |")
        print(f"| lock hold sum / mean (sum ÷ count) | {sum_:.4f} s / {ms(mean)} |")
        print(f"| lock hold p50 / p95 | {ms(p50)} / {ms(p95)} |")
        print(f"| how p50 / p95 were obtained | {how} |")
    else:
        print(f"| `{METRIC}{{operation=\"{OPERATION}\"}}` | not exported by this binary |")
    print()

    if not instrumented:
        raise SystemExit(f"lock_hold.py: the service exports no {METRIC}{{operation=\"{OPERATION}\"}}")
    if count != len(results):
        print(f"lock_hold.py: note: {count:.0f} lock holds recorded for {len(results)} proposals", file=sys.stderr)
    ok = statuses.get(201, 0)
    if ok < len(results):
        print(f"lock_hold.py: note: {len(results) - ok} of {len(results)} proposals were not persisted (201)", file=sys.stderr)
    if 2 * ok < len(results):
        raise SystemExit("lock_hold.py: fewer than half of the proposals were persisted: not the measurement intended")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--state", required=True)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--convs", type=int, default=20)
    p.add_argument("--turns", type=int, default=2000)
    p.add_argument("--prefix", default="lock")
    p.add_argument("--timeout", type=float, default=60, help="seconds per HTTP request")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("seed")
    s.add_argument("--data", required=True)
    s = sub.add_parser("propose")
    s.add_argument("--proposals", type=int, default=100)
    s.add_argument("--random-seed", type=int, default=7)
    s.add_argument("--verbose", action="store_true")
    a = p.parse_args()
    api = load.Api(a.url, a.key, timeout=a.timeout)
    {"seed": cmd_seed, "propose": cmd_propose}[a.cmd](a, api)


if __name__ == "__main__":
    main()
