"""Runs the fidelity benchmark against one gatekeeper binary and writes a results file.

    python bench.py <gatekeeper binary> [--sessions N] [--out results.json] [--jobs 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import multiprocessing
import platform
import subprocess
import sys
import time
from collections import Counter
from importlib import metadata
from pathlib import Path

import agent
import data
import measures
import summarizer as S
import tokens
from service import Client, Instance, binary_version

HERE = Path(__file__).resolve().parent

# One client and one summarizer per worker process, made once.
_worker: dict = {}


def init_worker(url: str) -> None:
    _worker["client"] = Client(url)
    _worker["summarizer"] = S.Summarizer()
    tokens.encoding()


def run_job(job: tuple[data.Session, str]) -> dict:
    session, strategy = job
    started = time.monotonic()
    run = agent.play(_worker["client"], _worker["summarizer"], strategy, session)
    result = measures.measure(run)
    result["seconds"] = round(time.monotonic() - started, 2)
    result["anchor_counts"] = dict(measures.anchor_rates(run))
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    conversations = data.read_conversations(args.data)
    sessions = data.build_sessions(conversations)[: args.sessions]
    jobs = [(s, strategy) for s in sessions for strategy in agent.STRATEGIES]
    started = time.monotonic()
    with Instance(args.binary) as instance:
        print(f"gatekeeper {binary_version(args.binary)} at {instance.url}; "
              f"{len(sessions)} sessions x {len(agent.STRATEGIES)} strategies", file=sys.stderr)
        with multiprocessing.Pool(args.jobs, initializer=init_worker, initargs=(instance.url,)) as pool:
            runs = []
            for result in pool.imap_unordered(run_job, jobs):
                runs.append(result)
                c = result["counts"]
                print(f"  session {result['session']:2d} {result['strategy']:8s} "
                      f"{result['seconds']:6.1f}s  proposals {c.get('proposals', 0):3d}  "
                      f"claimed {c.get('claimed', 0):3d}", file=sys.stderr)
    runs.sort(key=lambda r: (r["session"], agent.STRATEGIES.index(r["strategy"])))
    results = {
        "meta": meta(args, sessions, time.monotonic() - started),
        "strategies": {s: measures.aggregate([r for r in runs if r["strategy"] == s]) for s in agent.STRATEGIES},
        "anchor_rate_by_role": anchor_rate_by_role(runs),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out} in {results['meta']['seconds']:.0f}s", file=sys.stderr)
    return 0


def anchor_rate_by_role(runs: list[dict]) -> dict:
    """Anchors depend on the turns only, not on the strategy: one strategy's runs are counted."""
    counts: Counter = Counter()
    for r in runs:
        if r["strategy"] == agent.STRATEGIES[0]:
            counts.update(r["anchor_counts"])
    roles = sorted({k.rsplit("_with_facts", 1)[0] for k in counts if k.endswith("_with_facts")})
    return {
        role: {
            "turns_with_facts": counts[f"{role}_with_facts"],
            "anchored": counts[f"{role}_anchored"],
            "rate": measures.ratio(counts[f"{role}_anchored"], counts[f"{role}_with_facts"]),
        }
        for role in roles
    }


def meta(args, sessions: list[data.Session], seconds: float) -> dict:
    return {
        "binary": str(args.binary),
        "version": binary_version(args.binary),
        "commit": args.commit or git_commit_of(args.binary),
        "label": args.label,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
        "jobs": args.jobs,
        "data": {
            "path": str(args.data),
            "sha256": hashlib.sha256(Path(args.data).read_bytes()).hexdigest(),
            "sessions": len(sessions),
            "conversations": sum(len(s.conversations) for s in sessions),
            "turns": sum(len(s.turns) for s in sessions),
            "min_session_turns": data.MIN_SESSION_TURNS,
        },
        "parameters": {
            "window": agent.WINDOW,
            "threshold": agent.THRESHOLD,
            "summary_budget": agent.BUDGET,
            "max_raised_budget": agent.MAX_BUDGET,
            "wait_turns": agent.WAIT_TURNS,
            "max_fragment_chars": S.MAX_FRAGMENT_CHARS,
        },
        "summarizer": f"sumy {metadata.version('sumy')} LexRank",
        "tokenizer": f"tiktoken {metadata.version('tiktoken')} o200k_base ({tokens.find_bpe_file()})",
        "python": platform.python_version(),
    }


def git_commit_of(binary: Path) -> str | None:
    """The commit of the work tree the binary was built in, when it sits in a cargo target dir."""
    for parent in Path(binary).resolve().parents:
        if parent.name == "target":
            out = subprocess.run(["git", "-C", str(parent.parent), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True)
            return out.stdout.strip() or None
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary", type=Path, help="the gatekeeper binary to measure")
    p.add_argument("--sessions", type=int, default=None, help="only the first N sessions (quick runs)")
    p.add_argument("--out", type=Path, default=HERE / "results" / "latest.json")
    p.add_argument("--jobs", type=int, default=2, help="orchestrators running at once")
    p.add_argument("--data", type=Path, default=data.DEFAULT_DATA)
    p.add_argument("--label", default=None, help="a name for the report (e.g. before, after)")
    p.add_argument("--commit", default=None, help="the commit the binary was built from, if known")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
