#!/usr/bin/env python3
"""HTTP-side helper of bench/load.sh: seeds the service and times what wrk cannot.

Standard library only. Every subcommand talks to one running gatekeeper (--url, --key), keeps its
working files in --state, and appends its figures to <state>/results.tsv as `key<TAB>value`
lines, which `report` turns into docs/performance.md.

  template     append the 200 tau-bench conversations once (the service counts tokens and
               derives anchors) and keep every turn with its tokens and anchors: the seed's
               turns are these, sent with client-given tokens and anchors
  seed         N conversations of `per` tau-bench conversations each, then a checkpoint on every
               other one, then a file of reconstruct paths in equal thirds summary/raw_log/live
  append       turns/s of POST .../turns in batches, with or without client token counts, and
               the same rows as CSV files for the COPY reference
  compact      sequential persisted proposals over [0, range-1] of fresh conversations
  bigconv      one long conversation (for the range-size series)
  sizes        dry-run proposals over [0, size-1] of the long conversation
  appendloop   large token-less batches in a loop, for a bounded time (the stall test)
  metrics      snapshot of gatekeeper_reconstructions_total{source}
  rounds       of paired rounds (the service, then its reference), the median round's figures
  stats        p50/p99/mean/max of numbers on stdin
  report       the Markdown table (and the console summary) from results.tsv
"""

import argparse
import concurrent.futures
import csv
import gzip
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse

NOTES_MARKER = "<!-- notes: everything below this line is kept when bench/load.sh rewrites the file -->"


# ---------------------------------------------------------------- small helpers


def put(state, key, value):
    """Appends one figure to results.tsv (the last value of a key wins)."""
    if isinstance(value, float):
        value = f"{value:.6g}"
    with open(os.path.join(state, "results.tsv"), "a", encoding="utf-8") as f:
        f.write(f"{key}\t{value}\n")
    print(f"  {key} = {value}", flush=True)


def read_results(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if "\t" in line:
                k, v = line.split("\t", 1)
                out[k] = v
    return out


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def log(msg):
    print(f"[load.py {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Api:
    """One keep-alive connection per thread to the service."""

    def __init__(self, url, key, timeout=180):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.key = key
        self.timeout = timeout
        self.local = threading.local()

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.local.conn = c
        return c

    def request(self, method, path, body=None):
        """Returns (status, body bytes). One retry on a dropped keep-alive connection."""
        headers = {"authorization": f"Bearer {self.key}"}
        if body is not None:
            headers["content-type"] = "application/json"
        for attempt in (0, 1):
            c = self._conn()
            try:
                c.request(method, path, body=body, headers=headers)
                r = c.getresponse()
                return r.status, r.read()
            except (ConnectionError, http.client.HTTPException, TimeoutError):
                c.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def expect(self, method, path, body, ok):
        status, data = self.request(method, path, body)
        if status not in ok:
            raise SystemExit(
                f"{method} {path} answered {status}: {data[:400].decode('utf-8', 'replace')}"
            )
        return status, data


def turns_path(conv):
    return f"/v1/conversations/{conv}/turns"


def compactions_path(conv):
    return f"/v1/conversations/{conv}/compactions"


def frag(turn, with_tokens):
    """One turn of an append body, as compact JSON bytes."""
    d = {"role": turn["role"], "content": turn["content"]}
    if with_tokens:
        d["tokens"] = turn["tokens"]
        d["anchors"] = turn["anchors"]
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def body_of(frags):
    return b'{"turns":[' + b",".join(frags) + b"]}"


def load_template(state):
    with open(os.path.join(state, "template.json"), encoding="utf-8") as f:
        return json.load(f)


def flat_turns(template):
    return [t for conv in template for t in conv]


def summary_of(anchors_lists):
    """A summary that carries the given turns' anchors, ending like a finished sentence."""
    seen, parts = set(), []
    for anchors in anchors_lists:
        for a in anchors:
            if a not in seen:
                seen.add(a)
                parts.append(a)
    return "Summary of the conversation: " + "; ".join(parts) + "."


def proposal(frm, to, summary, dry_run):
    # A budget far above the ceiling's requirement: under the ceiling and not truncated, so the
    # anchored turns are covered and the rest uncovered (rule 5), never fail-closed.
    return json.dumps(
        {
            "from": frm,
            "to": to,
            "summary": summary,
            "summary_budget": 100_000_000,
            "finish_reason": "stop",
            "dry_run": dry_run,
        },
        ensure_ascii=False,
    ).encode("utf-8")


def run_parallel(fn, items, clients):
    with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
        return list(pool.map(fn, items))


# ---------------------------------------------------------------- subcommands


def tau_text(turn):
    """The turn's text exactly as gatekeeper::tau_bench::TranscriptTurn::text makes it."""
    content = turn.get("content") or ""
    calls = turn.get("tool_calls") or []
    if content or not calls:
        return content
    lines = []
    for call in calls:
        args = call.get("arguments")
        if args is None:
            args = ""
        elif not isinstance(args, str):
            args = json.dumps(args, separators=(",", ":"))
        lines.append(f"{call.get('name') or ''}({args})")
    return "\n".join(lines)


def cmd_template(a, api):
    convs = []
    with gzip.open(a.data, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                convs.append(
                    (rec["conversation"], [{"role": t["role"], "content": tau_text(t)} for t in rec["turns"] or []])
                )
    log(f"template: {len(convs)} tau-bench conversations, {sum(len(t) for _, t in convs)} turns")

    def one(item):
        name, turns = item
        body = body_of([frag(t, False) for t in turns])
        _, data = api.expect("POST", turns_path(f"tmpl-{name}"), body, (201,))
        answer = json.loads(data)
        assert len(answer["turns"]) == len(turns), name
        return [
            {"role": t["role"], "content": t["content"], "tokens": r["tokens"], "anchors": r["anchors"]}
            for t, r in zip(turns, answer["turns"])
        ]

    t0 = time.perf_counter()
    template = run_parallel(one, convs, a.clients)
    dt = time.perf_counter() - t0
    with open(os.path.join(a.state, "template.json"), "w", encoding="utf-8") as f:
        json.dump(template, f, ensure_ascii=False)
    n = sum(len(c) for c in template)
    put(a.state, "template_convs", len(template))
    put(a.state, "template_turns", n)
    put(a.state, "template_s", dt)


def cmd_seed(a, api):
    template = load_template(a.state)
    frags = [[frag(t, True) for t in conv] for conv in template]
    m = len(template)

    def parts(k):
        return [(k * a.per + j) % m for j in range(a.per)]

    # 1. The raw log: one append per conversation, tokens and anchors given by the client.
    def append_one(k):
        idx = parts(k)
        body = body_of([f for i in idx for f in frags[i]])
        api.expect("POST", turns_path(f"seed-{k}"), body, (201,))
        return sum(len(template[i]) for i in idx)

    log(f"seed: appending {a.convs} conversations ({a.per} tau-bench conversations each), {a.clients} clients")
    t0 = time.perf_counter()
    sizes = []
    done_turns = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.clients) as pool:
        for i, n in enumerate(pool.map(append_one, range(a.convs))):
            sizes.append(n)
            done_turns += n
            if (i + 1) % max(1, a.convs // 10) == 0:
                el = time.perf_counter() - t0
                log(f"  {i + 1}/{a.convs} conversations, {done_turns} turns, {done_turns / el:,.0f} turns/s")
    dt = time.perf_counter() - t0
    total = sum(sizes)
    put(a.state, "seed_convs", a.convs)
    put(a.state, "seed_turns", total)
    put(a.state, "seed_s", dt)
    put(a.state, "seed_turns_per_s", total / dt)

    # 2. Checkpoints on every other conversation: the first two thirds, with a summary carrying
    #    the anchors of every other turn of the range (so some turns are covered, some not).
    def checkpoint_one(k):
        n = sizes[k]
        to = (2 * n) // 3 - 1
        flat = [t for i in parts(k) for t in template[i]]
        summary = summary_of(flat[i]["anchors"] for i in range(0, to + 1, 2))
        status, data = api.expect("POST", compactions_path(f"seed-{k}"), proposal(0, to, summary, False), (201, 422))
        if status == 422:
            return k, None
        v = json.loads(data)
        return k, (v["from"], v["advanced_to"], [tuple(r) for r in v["covered"]])

    targets = list(range(0, a.convs, 2))
    log(f"seed: proposing {len(targets)} checkpoints")
    t0 = time.perf_counter()
    checkpoints = dict(run_parallel(checkpoint_one, targets, a.clients))
    dt = time.perf_counter() - t0
    put(a.state, "seed_checkpoints", sum(1 for v in checkpoints.values() if v))
    put(a.state, "seed_checkpoints_rejected", sum(1 for v in checkpoints.values() if not v))
    put(a.state, "seed_checkpoint_s", dt)

    # 3. Reconstruct paths: uniformly random (conversation, turn) pairs, kept until each answer
    #    kind has a third of the file. Bounded: at most 50 draws per path.
    def classify(k, t):
        cp = checkpoints.get(k)
        if not cp:
            return "live"
        frm, adv, covered = cp
        if not (frm <= t <= adv):
            return "live"
        return "summary" if any(s <= t <= e for s, e in covered) else "raw_log"

    rng = random.Random(a.random_seed)
    want = {"summary": a.paths // 3, "raw_log": a.paths // 3, "live": a.paths - 2 * (a.paths // 3)}
    got = {k: [] for k in want}
    for _ in range(50 * a.paths):
        if all(len(got[k]) >= want[k] for k in want):
            break
        k = rng.randrange(a.convs)
        t = rng.randrange(sizes[k])
        kind = classify(k, t)
        if len(got[kind]) < want[kind]:
            got[kind].append(f"/v1/conversations/seed-{k}/reconstruct/{t}")
    paths = [p for v in got.values() for p in v]
    rng.shuffle(paths)
    with open(a.paths_file, "w", encoding="utf-8") as f:
        f.write("\n".join(paths) + "\n")
    for kind, v in got.items():
        put(a.state, f"paths_{kind}", len(v))
    put(a.state, "paths_distinct", len(set(paths)))
    # A quick check that the classification matches what the service answers.
    for p in paths[:30]:
        status, data = api.expect("GET", p, None, (200,))
        kind = next(k for k, v in got.items() if p in v)
        source = json.loads(data)["source"]
        if source != kind:
            raise SystemExit(f"{p}: expected {kind}, the service answered {source}")


def cmd_append(a, api):
    template = load_template(a.state)
    turns = flat_turns(template)
    n = len(turns)
    with_tokens = not a.no_tokens
    frags = [frag(t, with_tokens) for t in turns]
    # Conversation i gets turns i*per_conv ... of the template, cyclically; batches prebuilt.
    jobs = []  # (client, conv, [bodies])
    for i in range(a.convs):
        start = (i * a.turns) % n
        seq = [(start + j) % n for j in range(a.turns)]
        bodies = [body_of([frags[x] for x in seq[b : b + a.batch]]) for b in range(0, a.turns, a.batch)]
        jobs.append((i % a.clients, f"{a.prefix}-{i}", bodies, seq))
    latencies = []
    lock = threading.Lock()

    def client(c):
        mine = []
        for cl, conv, bodies, _ in jobs:
            if cl != c:
                continue
            for body in bodies:
                t0 = time.perf_counter()
                api.expect("POST", turns_path(conv), body, (201,))
                mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    label = "with client token counts" if with_tokens else "service-side counting"
    log(f"append ({label}): {a.convs} conversations x {a.turns} turns, batches of {a.batch}, {a.clients} clients")
    t0 = time.perf_counter()
    run_parallel(client, range(a.clients), a.clients)
    dt = time.perf_counter() - t0
    total = a.convs * a.turns
    p = a.label
    put(a.state, f"{p}_turns", total)
    put(a.state, f"{p}_s", dt)
    put(a.state, f"{p}_turns_per_s", total / dt)
    put(a.state, f"{p}_batch_p50_ms", percentile(latencies, 50) * 1000)
    put(a.state, f"{p}_batch_p99_ms", percentile(latencies, 99) * 1000)
    if a.csv_dir:
        # The same rows for COPY, one file per client: the turns table's columns, content as
        # bytea hex, anchors as JSON; conversations copy-<i> (load.sh creates their rows).
        os.makedirs(a.csv_dir, exist_ok=True)
        files = [open(os.path.join(a.csv_dir, f"copy-{c}.csv"), "w", encoding="utf-8", newline="") for c in range(a.clients)]
        writers = [csv.writer(f) for f in files]
        for i, (cl, _, _, seq) in enumerate(jobs):
            w = writers[cl]
            for tid, x in enumerate(seq):
                t = turns[x]
                w.writerow(
                    [
                        a.tenant,
                        f"copy-{i}",
                        tid,
                        t["role"],
                        "\\x" + t["content"].encode("utf-8").hex(),
                        t["tokens"],
                        json.dumps(t["anchors"], ensure_ascii=False),
                        "",
                    ]
                )
        for f in files:
            f.close()


def cmd_compact(a, api):
    template = load_template(a.state)
    turns = flat_turns(template)
    n = len(turns)
    bodies = []
    for i in range(a.convs):
        # The conversation holds template turns (i*turns + j) % n, as `append` made it.
        start = (i * a.turns_per_conv) % n
        seq = [turns[(start + j) % n] for j in range(a.range)]
        summary = summary_of(seq[j]["anchors"] for j in range(a.range) if j % 3 != 2)
        bodies.append((f"{a.prefix}-{i}", proposal(0, a.range - 1, summary, a.dry_run)))
    log(f"compact: {len(bodies)} sequential {'dry-run' if a.dry_run else 'persisted'} proposals over {a.range} turns")
    lat, outcomes = [], {}
    for conv, body in bodies:
        t0 = time.perf_counter()
        status, data = api.request("POST", compactions_path(conv), body)
        lat.append(time.perf_counter() - t0)
        if status not in (200, 201):
            raise SystemExit(f"compaction on {conv} answered {status}: {data[:300]!r}")
        o = json.loads(data)["outcome"]
        outcomes[o] = outcomes.get(o, 0) + 1
    slowest = sorted(range(len(lat)), key=lambda i: lat[i], reverse=True)[:3]
    log("compact: slowest " + ", ".join(f"#{i} {lat[i] * 1000:.1f} ms" for i in slowest))
    p = a.label
    put(a.state, f"{p}_n", len(lat))
    put(a.state, f"{p}_p50_ms", percentile(lat, 50) * 1000)
    put(a.state, f"{p}_p99_ms", percentile(lat, 99) * 1000)
    put(a.state, f"{p}_mean_ms", statistics.mean(lat) * 1000)
    put(a.state, f"{p}_summary_bytes", len(json.loads(bodies[0][1])["summary"].encode()))
    put(a.state, f"{p}_outcomes", " ".join(f"{k}:{v}" for k, v in sorted(outcomes.items())))


def cmd_onerequests(a, _api):
    """The single-turn appends wrk sends (bench/requests.lua): one line per template turn,
    to one of `convs` conversations, content only."""
    turns = flat_turns(load_template(a.state))
    with open(a.out, "w", encoding="utf-8") as f:
        for j, t in enumerate(turns):
            body = body_of([frag(t, False)]).decode("utf-8")
            f.write(f"{turns_path(f'{a.prefix}-{j % a.convs}')}\t{body}\n")


def cmd_checkpoints(a, api):
    """The checkpoint ceiling: `clients` workers, each proposing successive persisted ranges of
    `range` turns over its own conversations, for at most `seconds`."""
    template = load_template(a.state)
    turns = flat_turns(template)
    n = len(turns)
    deadline = time.perf_counter() + a.seconds
    counts, lat = [0] * a.clients, []
    lock = threading.Lock()

    def client(c):
        mine = []
        for i in range(c, a.convs, a.clients):
            start = (i * a.turns_per_conv) % n
            frm = 0
            while frm + a.range <= a.turns_per_conv:
                if time.perf_counter() >= deadline:
                    break
                seq = [turns[(start + frm + j) % n] for j in range(a.range)]
                summary = summary_of(seq[j]["anchors"] for j in range(a.range) if j % 3 != 2)
                body = proposal(frm, frm + a.range - 1, summary, False)
                t0 = time.perf_counter()
                status, data = api.request("POST", compactions_path(f"{a.prefix}-{i}"), body)
                mine.append(time.perf_counter() - t0)
                if status == 422:  # a range whose turns the summary happens to miss
                    frm += a.range
                    continue
                if status != 201:
                    raise SystemExit(f"proposal on {a.prefix}-{i} answered {status}: {data[:300]!r}")
                counts[c] += 1
                frm = json.loads(data)["advanced_to"] + 1
        with lock:
            lat.extend(mine)

    log(f"checkpoints: {a.clients} clients, {a.range}-turn persisted proposals, at most {a.seconds} s")
    t0 = time.perf_counter()
    run_parallel(client, range(a.clients), a.clients)
    dt = time.perf_counter() - t0
    total = sum(counts)
    put(a.state, "ceil_cp_n", total)
    put(a.state, "ceil_cp_per_s", total / dt)
    put(a.state, "ceil_cp_p50_ms", percentile(lat, 50) * 1000)
    put(a.state, "ceil_cp_range", a.range)


def cmd_bigconv(a, api):
    template = load_template(a.state)
    turns = flat_turns(template)
    frags = [frag(t, True) for t in turns]
    n = len(turns)
    log(f"bigconv: {a.turns} turns into {a.conv}")
    for b in range(0, a.turns, a.batch):
        body = body_of([frags[x % n] for x in range(b, min(a.turns, b + a.batch))])
        api.expect("POST", turns_path(a.conv), body, (201,))


def cmd_sizes(a, api):
    template = load_template(a.state)
    turns = flat_turns(template)
    n = len(turns)
    for size in a.sizes:
        seq = [turns[j % n] for j in range(size)]
        summary = summary_of(seq[j]["anchors"] for j in range(size) if j % 3 != 2)
        body = proposal(0, size - 1, summary, True)
        lat = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            api.expect("POST", compactions_path(a.conv), body, (200,))
            lat.append(time.perf_counter() - t0)
        put(a.state, f"size_{size}_cmp_p50_ms", statistics.median(lat) * 1000)
        put(a.state, f"size_{size}_cmp_min_ms", min(lat) * 1000)


def cmd_appendloop(a, api):
    """Token-less batches of `batch` turns, one after another, until `seconds` or `max`."""
    template = load_template(a.state)
    turns = flat_turns(template)
    n = len(turns)
    body = body_of([frag(turns[x % n], False) for x in range(a.batch)])
    lat = []
    deadline = time.monotonic() + a.seconds
    for i in range(a.max):
        if time.monotonic() >= deadline:
            break
        t0 = time.perf_counter()
        api.expect("POST", turns_path(f"{a.prefix}-{i}"), body, (201,))
        lat.append(time.perf_counter() - t0)
    put(a.state, "stall_batches", len(lat))
    put(a.state, "stall_batch_turns", a.batch)
    if lat:
        put(a.state, "stall_batch_p50_ms", percentile(lat, 50) * 1000)
        put(a.state, "stall_batch_max_ms", max(lat) * 1000)


def cmd_metrics(a, api):
    status, data = api.expect("GET", "/metrics", None, (200,))
    seen = {"summary": 0, "raw_log": 0, "live": 0}
    for line in data.decode().splitlines():
        if line.startswith("gatekeeper_reconstructions_total{"):
            labels, value = line.rsplit(" ", 1)
            for src in seen:
                if f'source="{src}"' in labels:
                    seen[src] += int(float(value))
    for src, v in seen.items():
        put(a.state, f"metrics_{a.tag}_{src}", v)


def cmd_rounds(a, _api):
    """Paired rounds, each the service (`ours`) then its reference (`ref`), back to back: the
    round whose ratio ours/ref is the median (the lower middle of an even count) gives both
    figures, so the ratio reported was measured side by side and one round that other work on
    the machine slowed does not decide it."""
    r = read_results(os.path.join(a.state, "results.tsv"))
    rounds = []
    for n in range(1, a.rounds + 1):
        rat = ratio(r.get(f"{a.ours}_r{n}_{a.ours_key}"), r.get(f"{a.ref}_r{n}_{a.ref_key}"))
        if rat is None:
            raise SystemExit(f"rounds: round {n} has no {a.ours}_r{n}_{a.ours_key} or {a.ref}_r{n}_{a.ref_key}")
        rounds.append((rat, n))
    chosen = sorted(rounds)[(len(rounds) - 1) // 2][1]
    for prefix, out in ((a.ours, a.ours), (a.ref, a.ref_out or a.ref)):
        head = f"{prefix}_r{chosen}_"
        for k, v in r.items():
            if k.startswith(head):
                put(a.state, f"{out}_{k[len(head):]}", v)
    for key in a.sum:
        put(a.state, f"{a.ours}_all_{key}", sum(float(r.get(f"{a.ours}_r{n}_{key}", 0)) for n in range(1, a.rounds + 1)))
    put(a.state, f"{a.ours}_round_ratios", ", ".join(f"{x:.2f}" for x, _ in rounds))
    put(a.state, f"{a.ours}_round", chosen)


def cmd_stats(a, _api):
    values = [float(x) for x in sys.stdin.read().split()]
    if not values:
        raise SystemExit("stats: no numbers on stdin")
    print(
        f"{len(values)} {percentile(values, 50):.6g} {percentile(values, 99):.6g} "
        f"{statistics.mean(values):.6g} {max(values):.6g}"
    )


# ---------------------------------------------------------------- report


def f_num(v, digits=0):
    if v is None:
        return "n/a"
    v = float(v)
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def f_ms(v):
    if v is None:
        return "n/a"
    v = float(v)
    return f"{v:.2f} ms" if v < 10 else (f"{v:.1f} ms" if v < 100 else f"{v:,.0f} ms")


def ratio(a, b):
    try:
        return float(a) / float(b)
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def f_ratio(r):
    return "n/a" if r is None else f"{r:.2f}×"


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "**not met**")


def cmd_report(a, _api):
    r = read_results(a.results)
    g = r.get
    rows = []

    def row(what, ours, ref, rat, goal, status):
        rows.append(f"| {what} | {ours} | {ref} | {rat} | {goal} | {status} |")

    def by_round(rat, ours):
        """A ratio, and every round's when the figure is the median of paired rounds."""
        rounds = g(f"{ours}_round_ratios")
        return f_ratio(rat) + (f" (rounds {rounds})" if rounds and "," in rounds else "")

    # Reconstruct.
    rr = ratio(g("rec_rps"), g("pgb_tps"))
    row(
        f"`GET …/reconstruct/{{turn}}`, {g('rec_conns', '64')} connections: throughput",
        f"{f_num(g('rec_rps'))} req/s",
        f"{f_num(g('pgb_tps'))} tps (`pgbench -S -M prepared`)",
        by_round(rr, "rec"),
        "≥ 0.8×",
        verdict(None if rr is None else rr >= 0.8),
    )
    row(
        "  latency p50 / p99 / mean",
        f"{f_ms(g('rec_p50_ms'))} / {f_ms(g('rec_p99_ms'))} / {f_ms(g('rec_mean_ms'))}",
        f"{f_ms(g('pgb_p50_ms'))} / {f_ms(g('pgb_p99_ms'))} / {f_ms(g('pgb_mean_ms'))}",
        " / ".join(f_ratio(ratio(g(f"rec_{q}_ms"), g(f"pgb_{q}_ms"))) for q in ("p50", "p99", "mean")),
        "",
        "",
    )
    rh = ratio(g("rec_hot_rps"), g("pgb_tps"))
    row(
        f"  the same on a hot set of {f_num(g('rec_hot_paths'))} paths: throughput, p50 / p99",
        f"{f_num(g('rec_hot_rps'))} req/s, {f_ms(g('rec_hot_p50_ms'))} / {f_ms(g('rec_hot_p99_ms'))}",
        f"{f_num(g('pgb_tps'))} tps, {f_ms(g('pgb_p50_ms'))} / {f_ms(g('pgb_p99_ms'))}",
        f_ratio(rh),
        "",
        "",
    )
    if g("rep_rps") is not None:
        reads = (g("rep_reads_replica"), g("rep_reads_primary"))
        share = ""
        if None not in reads and float(reads[0]) + float(reads[1]) > 0:
            share = f"; {100 * float(reads[0]) / (float(reads[0]) + float(reads[1])):.1f} % of reads answered by the replica"
        rp = ratio(g("rep_rps"), g("pgb_tps"))
        row(
            "  the same through a second process reading from a streaming replica: throughput, p50 / p99",
            f"{f_num(g('rep_rps'))} req/s, {f_ms(g('rep_p50_ms'))} / {f_ms(g('rep_p99_ms'))} (errors {g('rep_errors', 'n/a')}{share})",
            f"{f_num(g('rec_rps'))} req/s from the primary; {f_num(g('pgb_tps'))} tps pgbench",
            f"{f_ratio(ratio(g('rep_rps'), g('rec_rps')))} / {f_ratio(rp)}",
            "",
            "",
        )
    row("  service CPU per request (user + system), all paths / hot set", f"{f_num(g('rec_service_cpu_us'), 1)} µs / {f_num(g('rec_hot_service_cpu_us'), 1)} µs", "", "", "", "")
    errors, requests = g("rec_all_errors", g("rec_errors")), g("rec_all_requests", g("rec_requests"))
    row("  errors (non-2xx, socket), every round", f"{f_num(errors)} of {f_num(requests)}", "", "", "0", verdict(None if errors is None else float(errors) == 0))
    # Appends.
    for label, what in (("app_tok", "client token counts"), ("app_notok", "service-side counting")):
        # The COPY of the label's median round (a run before rounds had one COPY).
        copy = g(f"{label}_copy_rows_per_s", g("copy_rows_per_s"))
        rat = ratio(g(f"{label}_turns_per_s"), copy)
        row(
            f"`POST …/turns`, batches of {g('append_batch', '500')}, {what}",
            f"{f_num(g(f'{label}_turns_per_s'))} turns/s (batch p50 {f_ms(g(f'{label}_batch_p50_ms'))})",
            f"{f_num(copy)} rows/s (`COPY` via psql)",
            by_round(rat, label),
            "≥ 0.5×",
            verdict(None if rat is None else rat >= 0.5),
        )
    # Compaction 2,000.
    rat = ratio(g("cmp2k_p50_ms"), g("sel2k_p50_ms"))
    row(
        f"`POST …/compactions`, 2,000 turns, persisted ({g('cmp2k_n', '?')} sequential): p50",
        f_ms(g("cmp2k_p50_ms")),
        f"{f_ms(g('sel2k_p50_ms'))} (one `SELECT id, role, tokens, anchors`)",
        f_ratio(rat),
        "≤ 2×",
        verdict(None if rat is None else rat <= 2.0),
    )
    row(
        "  p99",
        f_ms(g("cmp2k_p99_ms")),
        f_ms(g("sel2k_p99_ms")),
        f_ratio(ratio(g("cmp2k_p99_ms"), g("sel2k_p99_ms"))),
        "",
        "",
    )
    # The ceilings of one primary.
    if g("ceil_app_rps") is not None:
        row(
            f"ceiling of one primary: `POST …/turns`, one turn per request, no tokens or anchors, {g('rec_conns', '64')} connections over 1,000 conversations",
            f"{f_num(g('ceil_app_rps'))} appends/s (p50 {f_ms(g('ceil_app_p50_ms'))} / p99 {f_ms(g('ceil_app_p99_ms'))})",
            "",
            "",
            "",
            f"errors: {g('ceil_app_errors', 'n/a')}",
        )
    if g("ceil_cp_per_s") is not None:
        row(
            f"ceiling of one primary: `POST …/compactions`, {g('ceil_cp_range', '?')}-turn ranges, persisted, {g('append_clients', '?')} clients on their own conversations",
            f"{f_num(g('ceil_cp_per_s'))} checkpoints/s (p50 {f_ms(g('ceil_cp_p50_ms'))}; {f_num(g('ceil_cp_n'))} made)",
            "",
            "",
            "",
            "",
        )
    sizes = sorted(int(k.split("_")[1]) for k in r if k.startswith("size_") and k.endswith("_cmp_p50_ms"))
    for s in sizes:
        c, q = g(f"size_{s}_cmp_p50_ms"), g(f"size_{s}_sel_p50_ms")
        per_turn = f" ({float(c) * 1000 / s:.1f} µs/turn)" if c else ""
        row(f"  dry run over {s:,} turns: median", f"{f_ms(c)}{per_turn}", f_ms(q), f_ratio(ratio(c, q)), "linear", "")
    # Stall.
    row(
        f"reconstruct, {g('stall_conns', '?')} connections, p50 / p99 / max, while {f_num(g('stall_batch_turns'))}-turn "
        f"token-less batches are appended ({g('stall_batches', '?')} batches, each {f_ms(g('stall_batch_p50_ms'))})",
        f"{f_ms(g('stall_load_p50_ms'))} / {f_ms(g('stall_load_p99_ms'))} / {f_ms(g('stall_load_max_ms'))}",
        f"{f_ms(g('stall_base_p50_ms'))} / {f_ms(g('stall_base_p99_ms'))} / {f_ms(g('stall_base_max_ms'))} (same, no appends)",
        f"{f_ratio(ratio(g('stall_load_p50_ms'), g('stall_base_p50_ms')))} / {f_ratio(ratio(g('stall_load_p99_ms'), g('stall_base_p99_ms')))} / {f_ratio(ratio(g('stall_load_max_ms'), g('stall_base_max_ms')))}",
        "no stall",
        f"non-2xx: {g('stall_load_errors', '?')} / {g('stall_base_errors', '?')}",
    )
    # Search (bench/search.py).
    if g("search_top3_rare_pct") is not None:
        row(
            f"search: a turn's distinctive token finds it in the top 3 ({f_num(g('search_rare_turns'))} turns whose token at most 3 turns hold, {g('search_sessions', '?')} real sessions)",
            f"{g('search_top3_rare_pct')} %",
            f"{g('search_top3_all_pct')} % over all {f_num(g('search_recall_turns'))} turns",
            "",
            "≥ 95 %",
            verdict(float(g("search_top3_rare_pct")) >= 95),
        )
        row(
            f"  `GET …/search` in a {f_num(g('search_turns'))}-turn conversation: p50 / p99 (common words p50)",
            f"{f_ms(g('search_conv_p50_ms'))} / {f_ms(g('search_conv_p99_ms'))} ({f_ms(g('search_conv_common_p50_ms'))})",
            "",
            "",
            "p50 ≤ 10 ms",
            verdict(float(g("search_conv_p50_ms")) <= 10),
        )
        row(
            f"  `GET /v1/search` over the tenant's {f_num(g('seed_turns'))}+ turns: p50 / p99 (common words p50)",
            f"{f_ms(g('search_tenant_p50_ms'))} / {f_ms(g('search_tenant_p99_ms'))} ({f_ms(g('search_tenant_common_p50_ms'))})",
            "",
            "",
            "p50 ≤ 50 ms",
            verdict(float(g("search_tenant_p50_ms")) <= 50),
        )
        row(
            "  search index size per turn (heap + GIN), beside the turns table's",
            f"{f_num(g('search_bytes_per_turn'))} B",
            f"{f_num(g('turns_bytes_per_turn'))} B (`turns`, heap + indexes)",
            f_ratio(ratio(g("search_bytes_per_turn"), g("turns_bytes_per_turn"))),
            "",
            "",
        )
    # Memory: the peak of each phase (VmHWM, reset between phases).
    phases = [(k[len("rss_peak_") : -len("_mib")], float(v)) for k, v in r.items() if k.startswith("rss_peak_") and k.endswith("_mib")]
    if phases:
        top_phase, top = max(phases, key=lambda kv: kv[1])
        per = ", ".join(f"{name} {v:.0f}" for name, v in phases)
        row(f"peak RSS (VmHWM) over the run, in {top_phase} (by phase, MiB: {per})", f"{top:.1f} MiB", "", "", "< 256 MiB", verdict(top < 256))
    v = g("rss_idle_mib")
    row("idle RSS after start", f"{f_num(v, 1)} MiB", "", "", "< 64 MiB", verdict(None if v is None else float(v) < 64))

    mix = ""
    if g("metrics_after_live") is not None and g("metrics_before_live") is not None:
        d = {s: int(g(f"metrics_after_{s}")) - int(g(f"metrics_before_{s}")) for s in ("summary", "raw_log", "live")}
        tot = sum(d.values()) or 1
        mix = ", ".join(f"{s} {100 * v / tot:.0f}%" for s, v in d.items())

    scale = g("scale", "1")
    warning = f"\n> **Warning:** {g('disturbed')}.\n" if g("disturbed") else ""
    md = f"""# Performance

Measured by [`bench/load.sh`](../bench/load.sh) in one run; every figure beside its reference from the
same run, on the same machine, against the same Postgres. Regenerated by each run.
{warning}
- **Date:** {g('date', '?')} · **commit:** `{g('commit', '?')}` · **scale:** {scale} (`LOAD_SCALE`; 1 is the full run)
- **Machine:** {g('nproc', '?')} cores, {g('cpu', '?')}, {g('mem_gib', '?')} GiB · PostgreSQL {g('pg_version', '?')} (default settings; big tables {g('partitions', 'not partitioned') if g('partitions') not in (None, '0') else 'not partitioned'}{' hash partitions' if g('partitions') not in (None, '0') else ''}) · load average at start {g('loadavg_start', '?')}, at end {g('loadavg_end', '?')}
- **Seed:** {f_num(g('seed_turns'))} turns in {f_num(g('seed_convs'))} conversations (the 200 tau-bench airline conversations, {g('seed_per', '4')} per conversation, repeated), appended through the API with client token counts and anchors in {f_num(g('seed_s'), 1)} s ({f_num(g('seed_turns_per_s'))} turns/s, {g('seed_clients', '?')} clients); {f_num(g('seed_checkpoints'))} checkpoints
- **Reconstruct paths:** {f_num(g('paths_distinct'))} distinct turns of the seed, drawn at random in thirds summary/raw_log/live; answered: {mix or 'n/a'}. The hot set is the first {f_num(g('rec_hot_paths'))} of them
- **Durations:** {g('duration_s', '?')} s per throughput measurement · whole run {g('wall_s', '?')} s

| what | gatekeeper | reference | ratio | goal | |
|---|---|---|---|---|---|
{chr(10).join(rows)}

## Method

- **Load tool: wrk** (Debian's package). It is C with LuaJIT and costs little CPU per request, which
  matters when the load generator shares 2 cores with the service and Postgres; its Lua hooks pick
  each request's path from a file (`bench/requests.lua`) and print the figures in `done()`.
  `wrk -t2 -c64`, latency from wrk's histogram (closed loop: no coordinated-omission correction,
  same as pgbench's), after a 3 s warm-up. The main figure draws from all the paths (more answers
  than the service's answer cache holds by default, so many requests go to the database); the
  hot-set line draws from a tenth of them, as agents re-reading recent turns would.
- **Reconstruct reference:** `pgbench -S -M prepared -c 64 -j 2 -T <same duration>` on a separate
  `pgbench -i -s 10` database of the same server, latencies from pgbench's per-transaction log
  (`--sampling-rate`; its mean is pgbench's own `latency average`), run while the service is idle.
  **Paired rounds:** {g('rounds', '1')} rounds, each the service's measurement then pgbench's, back to
  back, after a `CHECKPOINT` (the seed's and `pgbench -i`'s writes are flushed before either is
  timed); the table gives the round whose ratio is the median (the lower middle of an even count),
  with every round's ratio beside it, so other work on the machine during one measurement does not
  decide the ratio. Both clients run on the same 2 cores as their server. At 64 clients on 2
  cores pgbench's latencies are bimodal (most answers in a fraction of a millisecond, the rest
  after a scheduling wait), so its p50 flatters it: compare throughput and the means.
- **Appends:** {f_num(g('append_convs'))} fresh conversations × {f_num(g('append_turns_per_conv'))} turns in batches of
  {g('append_batch', '500')}, {g('append_clients', '?')} concurrent clients (each its own conversations, sequential
  batches), bodies built before the clock starts; once with `tokens` and `anchors` given, once
  without (the service counts with o200k_base and derives anchors). **Reference:** the same rows
  (the `turns` table's columns, content as bytea, anchors as jsonb) loaded by {g('append_clients', '?')}
  concurrent `psql \\copy … (FORMAT csv)` streams, one transaction each, into a scratch copy of
  `turns` (`LIKE turns INCLUDING ALL` plus the same foreign key) in the service's database.
  The same {g('rounds', '1')} paired rounds: each the two append runs then the COPY, the median round's
  figures per line (the first round's conversations are the ones used below; later rounds append
  as a second tenant, so the tenant-wide search covers what it did with one round).
- **Compactions:** {g('cmp2k_n', '?')} sequential proposals, each on one of the fresh conversations from the
  append run with client token counts, over turns [0, 1999], **persisted** (not dry runs; the
  checkpoint row and its verdict are written). The summary carries the anchors of two turns in three
  (about {f_num(g('cmp2k_summary_bytes'))} bytes) under a budget far above the ceiling, so the outcome
  is `narrowed`. **Reference:** the same conversations' `SELECT id, role, tokens, anchors FROM turns
  WHERE tenant = … AND conversation = … AND id BETWEEN 0 AND 1999`, timed by psql's `\\timing`
  (client round trip included), p50/p99 over the same count.
- **Replica column:** after the seed, `pg_basebackup -R` copies the cluster ({g('replica_basebackup_s', '?')} s) and a
  second cluster on another port replays from the primary (the server's default settings); a
  second service process with `GATEKEEPER_READ_DATABASE_URLS` pointing at it answers the same
  reconstruct load (same paths, connections, duration, after a 3 s warm-up) while the first
  service is idle. Its own `gatekeeper_replica_reads_total` says which database answered. All
  of it on the same 2 cores, so the replica adds no capacity here: the figure shows the cost of
  the replica path, not the gain of a second machine.
- **Ceilings of one primary:** single-turn appends (no ids, tokens or anchors: the service
  assigns, counts and derives) drawn at random over 1,000 conversations by `wrk -c64`
  (`bench/requests.lua`, POST lines), each its own transaction; and persisted proposals of 100-turn ranges
  made back to back by {g('append_clients', '?')} clients, each over its own conversations of the service-side-counting
  append run, each range starting where the last checkpoint advanced to, for at most the
  measurement duration.
- **Range sizes:** dry runs over [0, n-1] of one {f_num(g('big_turns'))}-turn conversation, median of
  {g('size_reps', '5')}; reference: the same SELECT over the same range, median of {g('size_reps', '5')}.
- **Stall test:** `wrk -t1 -c{g('stall_conns', '?')}` on the same paths for {g('stall_s', '?')} s, once alone and once while a
  client appends {f_num(g('stall_batch_turns'))}-turn batches without token counts, back to back. A max latency near
  a batch's CPU time would say the batch's counting blocked the async runtime.
- **Search:** [`bench/search.py`](../bench/search.py) after the seed. Recall: the 200 tau-bench
  conversations joined into sessions of 400+ turns (no turn twice); each turn's distinctive token is
  the script's own choice (its token of 3+ characters held by the fewest turns of the session, the
  longest of those; the service's stop words left out), searched for in the session with `limit=3`.
  Latency: 1,000 of those tokens (and common words) searched for in a 10,000-turn conversation of
  the same turns, then across the whole tenant, one request at a time. Size: `pg_total_relation_size`
  of the search index (`search_blocks`) and of `turns`, over the turns they hold.
- **Memory:** `VmRSS` of the service right after `/readyz` (idle); `VmHWM` read after each phase and
  reset (`/proc/<pid>/clear_refs`), so the peak is attributed to a phase.
- On this 2-core machine every number includes the load generator's CPU and whatever else ran
  (see the load averages above); compare ratios within one run rather than absolute figures across
  runs.

## Rerun

```sh
bench/load.sh                  # full run: about 4 minutes plus the release build; rewrites this file
LOAD_SCALE=0.05 bench/load.sh  # a quick end-to-end check with a small seed and short durations
```

Needs root for `apt-get` (installs `wrk` and `pgbench` when missing) and a local Postgres
(started with `pg_ctlcluster` when not running). See [`bench/README.md`](../bench/README.md) for
the knobs.
"""
    # Notes written by hand below the marker survive the next run.
    kept = ""
    if os.path.exists(a.out):
        with open(a.out, encoding="utf-8") as f:
            old = f.read()
        if NOTES_MARKER in old:
            kept = old[old.index(NOTES_MARKER) :]
    md += "\n" + (kept or NOTES_MARKER + "\n")
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(md)
    print()
    print("\n".join(line for line in md.splitlines() if line.startswith("|")))


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("GK_URL", "http://127.0.0.1:8080"))
    p.add_argument("--key", default=os.environ.get("GK_KEY", ""))
    p.add_argument("--state", default=os.environ.get("GK_STATE", "."))
    p.add_argument("--clients", type=int, default=4)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("template")
    s.add_argument("--data", required=True)

    s = sub.add_parser("seed")
    s.add_argument("--convs", type=int, required=True)
    s.add_argument("--per", type=int, default=4)
    s.add_argument("--paths", type=int, required=True)
    s.add_argument("--paths-file", required=True)
    s.add_argument("--random-seed", type=int, default=7)

    s = sub.add_parser("append")
    s.add_argument("--label", required=True)
    s.add_argument("--prefix", required=True)
    s.add_argument("--convs", type=int, required=True)
    s.add_argument("--turns", type=int, default=2000)
    s.add_argument("--batch", type=int, default=500)
    s.add_argument("--no-tokens", action="store_true")
    s.add_argument("--csv-dir")
    s.add_argument("--tenant", default="bench")

    s = sub.add_parser("compact")
    s.add_argument("--label", required=True)
    s.add_argument("--prefix", required=True)
    s.add_argument("--convs", type=int, required=True)
    s.add_argument("--turns-per-conv", type=int, default=2000)
    s.add_argument("--range", type=int, default=2000)
    s.add_argument("--dry-run", action="store_true")

    s = sub.add_parser("onerequests")
    s.add_argument("--prefix", required=True)
    s.add_argument("--convs", type=int, required=True)
    s.add_argument("--out", required=True)

    s = sub.add_parser("checkpoints")
    s.add_argument("--prefix", required=True)
    s.add_argument("--convs", type=int, required=True)
    s.add_argument("--turns-per-conv", type=int, default=2000)
    s.add_argument("--range", type=int, default=100)
    s.add_argument("--seconds", type=float, required=True)

    s = sub.add_parser("bigconv")
    s.add_argument("--conv", required=True)
    s.add_argument("--turns", type=int, required=True)
    s.add_argument("--batch", type=int, default=500)

    s = sub.add_parser("sizes")
    s.add_argument("--conv", required=True)
    s.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], required=True)
    s.add_argument("--reps", type=int, default=5)

    s = sub.add_parser("appendloop")
    s.add_argument("--prefix", required=True)
    s.add_argument("--batch", type=int, default=10000)
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--max", type=int, default=100)

    s = sub.add_parser("metrics")
    s.add_argument("--tag", required=True)

    s = sub.add_parser("rounds")
    s.add_argument("--ours", required=True)
    s.add_argument("--ref", required=True)
    s.add_argument("--ours-key", required=True)
    s.add_argument("--ref-key", required=True)
    s.add_argument("--rounds", type=int, required=True)
    s.add_argument("--ref-out", help="prefix of the chosen round's reference figures (default: --ref)")
    s.add_argument("--sum", type=lambda v: v.split(","), default=[], help="keys summed over all rounds, as <ours>_all_<key>")

    sub.add_parser("stats")

    s = sub.add_parser("report")
    s.add_argument("--results", required=True)
    s.add_argument("--out", required=True)

    a = p.parse_args()
    api = Api(a.url, a.key)
    globals()["cmd_" + a.cmd](a, api)


if __name__ == "__main__":
    main()
