"""Writes docs/fidelity.md from one results file, or two side by side ("before" and "after").

    python3 bench/fidelity/report.py results/before.json [results/after.json] [--out docs/fidelity.md]
                                     [--notes notes.md]

Standard library only, so it runs without the benchmark's venv.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parents[1] / "docs" / "fidelity.md"
STRATEGIES = ("naive", "planned", "anchored")


def pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def num(x) -> str:
    if x is None:
        return "–"
    return f"{x:,.2f}" if isinstance(x, float) else f"{x:,}"


def counted(key: str):
    return lambda agg, n: num(agg["counts"].get(key, 0))


def pair(a: str, b: str):
    return lambda agg, n: f"{num(agg['counts'].get(a, 0))} / {num(agg['counts'].get(b, 0))}"


# (label, how to show it from a strategy's aggregate and the number of sessions)
ROWS = [
    ("**claim precision**: key fact in the summary", lambda a, n: pct(a["claim_precision_key"])),
    ("claim precision: all top-3 facts", lambda a, n: pct(a["claim_precision_top3"])),
    ("claim precision, checkpoints of 2+ turns only (key fact)",
     lambda a, n: pct(a.get("claim_precision_key_multi_turn"))),
    ("turns claimed (`source: summary`) / of them without a content word",
     pair("claimed", "claimed_without_facts")),
    ("**baseline precision** (ungated pointer set): key fact", lambda a, n: pct(a["baseline_precision_key"])),
    ("baseline precision: all top-3 facts", lambda a, n: pct(a["baseline_precision_top3"])),
    ("**yield**: covered / turns asked (Σ over proposals)", lambda a, n: pct(a["yield"])),
    ("yield: covered / distinct turns asked", lambda a, n: pct(a["yield_distinct"])),
    ("**final working context** / raw tokens (mean of sessions)", lambda a, n: pct(a["final_context_share_mean"])),
    ("final context made of: summaries / raw_log turns / live turns", lambda a, n: " / ".join(
        pct(a["counts"].get(f"final_context_{part}_tokens", 0) / a["counts"]["final_context_tokens"])
        if a["counts"].get("final_context_tokens") else "–" for part in ("summary", "raw_log", "live"))),
    ("sessions ending above the 20,000-token window",
     lambda a, n: f"{a['counts'].get('final_context_over_window', 0)} of {n}"),
    ("**budgeted working context** (`max_tokens` = 20,000) / raw tokens (mean of sessions)",
     lambda a, n: pct(a.get("budgeted_context_share_mean"))),
    ("budgeted context: sessions that do not fit 20,000 / stubs in all",
     lambda a, n: f"{a['counts'].get('budgeted_context_over_window', 0)} of {n} / "
     f"{num(a['counts'].get('budgeted_context_stubs', 0))}" if "budgeted_context_stubs" in a["counts"] else "–"),
    ("sessions where the window never filled", lambda a, n: f"{a['counts'].get('window_never_filled', 0)} of {n}"),
    ("proposals", counted("proposals")),
    ("turns per proposal", lambda a, n: num(a.get("turns_per_proposal"))),
    ("proposals of a single turn", counted("single_turn_proposals")),
    ("outcomes: accepted / narrowed / partial / rejected", lambda a, n: " / ".join(
        num(a["counts"].get(f"outcome_{o}", 0)) for o in ("accepted", "narrowed", "partial", "rejected"))),
    ("checkpoints persisted", counted("checkpoints")),
    ("summary tokens / range tokens (persisted checkpoints)", lambda a, n: pct(a.get("summary_to_range_tokens"))),
    ("checkpoints that grew the context (covered turns' tokens < summary tokens)", counted("checkpoints_growing_context")),
    ("net tokens saved by checkpoints (covered − summary) / raw tokens",
     lambda a, n: pct(a["counts"].get("net_tokens_saved", 0) / a["counts"]["raw_tokens"])
     if a["counts"].get("raw_tokens") else "–"),
    ("pauses after a rejection / an empty plan", pair("pause_rejected", "pause_plan_empty")),
    ("plan advice seen: compact / wait / raise_budget", lambda a, n: " / ".join(
        num(a["counts"].get(f"advice_{x}", 0)) for x in ("compact", "wait", "raise_budget"))),
    ("pauses on advice `wait` / `raise_budget`", pair("pause_advice_wait", "pause_advice_raise_budget")),
    ("budget raises (advice `raise_budget`)", counted("budget_raises")),
    ("plans that listed per-turn anchors", counted("plans_with_turn_anchors")),
    ("fall-through answers (raw_log + live) / not byte-exact",
     lambda a, n: f"{num(a['counts'].get('source_raw_log', 0) + a['counts'].get('source_live', 0))} / "
                  f"{num(a['counts'].get('fall_through_mismatches', 0))}"),
    ("token counts differing from the service: turns / summaries",
     pair("token_mismatches", "summary_token_mismatches")),
]


def load(path: Path) -> dict:
    results = json.loads(path.read_text())
    results["_name"] = results["meta"].get("label") or path.stem
    results["_path"] = display_path(path)
    return results


def display_path(path: Path) -> str:
    """Relative to the repository when the file is inside it."""
    try:
        return str(path.resolve().relative_to(HERE.parents[1]))
    except ValueError:
        return str(path)


def metrics_table(files: list[dict]) -> list[str]:
    columns = [(s, f) for s in STRATEGIES for f in files]
    header = "| | " + " | ".join(
        f"{s} ({f['_name']})" if len(files) > 1 else s for s, f in columns) + " |"
    lines = [header, "|---|" + "---:|" * len(columns)]
    for label, show in ROWS:
        cells = [show(f["strategies"][s], f["meta"]["data"]["sessions"]) for s, f in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def anchor_table(files: list[dict]) -> list[str]:
    roles = sorted({r for f in files for r in f["anchor_rate_by_role"]})
    lines = ["| role | " + " | ".join(f"{f['_name']}" for f in files) + " |",
             "|---|" + "---:|" * len(files)]
    for role in roles:
        cells = []
        for f in files:
            r = f["anchor_rate_by_role"].get(role)
            cells.append("–" if r is None else f"{pct(r['rate'])} ({num(r['anchored'])} of {num(r['turns_with_facts'])})")
        lines.append(f"| {role} | " + " | ".join(cells) + " |")
    return lines


def run_table(files: list[dict]) -> list[str]:
    lines = ["| | " + " | ".join(f["_name"] for f in files) + " |", "|---|" + "---|" * len(files)]
    rows = [
        ("binary", lambda m: f"`{m['binary']}`"),
        ("`--version`", lambda m: m["version"]),
        ("commit", lambda m: m.get("commit") or "unknown"),
        ("run at (UTC)", lambda m: m["date"]),
        ("run time", lambda m: f"{m['seconds']:.0f} s, {m['jobs']} orchestrators at once"),
        ("data", lambda m: f"{m['data']['sessions']} sessions, {m['data']['conversations']} conversations, "
                           f"{m['data']['turns']:,} turns (sha256 {m['data']['sha256'][:12]}…)"),
        ("summarizer", lambda m: m["summarizer"]),
        ("tokenizer", lambda m: m["tokenizer"].split(" (")[0]),
    ]
    for label, show in rows:
        lines.append(f"| {label} | " + " | ".join(str(show(f["meta"])) for f in files) + " |")
    return lines


def observations(f: dict) -> list[str]:
    """Plain facts of one results file, said in words."""
    s = f["strategies"]
    n = f["meta"]["data"]["sessions"]
    out = []
    over = {k: v["counts"].get("final_context_over_window", 0) for k, v in s.items()}
    out.append(
        "- Sessions ending above the window: " + ", ".join(f"{k} {v} of {n}" for k, v in over.items()) + "."
    )
    for k, v in s.items():
        c = v["counts"]
        if c.get("proposals"):
            out.append(
                f"- {k}: {c.get('single_turn_proposals', 0):,} of {c['proposals']:,} proposals were a single "
                f"turn; claim precision {pct(v['claim_precision_key'])} against "
                f"{pct(v['baseline_precision_key'])} for the ungated pointer set."
            )
    for k, v in s.items():
        reasons = {key[len("advice_reason_"):]: n for key, n in v["counts"].items() if key.startswith("advice_reason_")}
        if reasons:
            out.append(f"- {k}: plan advice (`advice_reason`) seen: "
                       + ", ".join(f"`{r}` {n:,}" for r, n in sorted(reasons.items())) + ".")
    mism = sum(v["counts"].get("fall_through_mismatches", 0) for v in s.values())
    out.append(f"- Fall-through answers that were not the appended text byte for byte: {mism}.")
    return out


def render(files: list[dict], notes: str | None) -> str:
    p = files[0]["meta"]["parameters"]
    sources = " and ".join(f"`{f['_path']}` ({f['_name']})" for f in files)
    parts = [
        "# Fidelity: do the coverage claims hold on real agent sessions?",
        "",
        f"Generated by `bench/fidelity/report.py` from {sources}. How to run it, and the oracle's "
        "exact definition: [bench/fidelity/README.md](../bench/fidelity/README.md).",
        "",
        "An orchestrator appends the tau-bench airline conversations, joined into long sessions, one "
        f"turn at a time; whenever the working context (`GET .../context`) is above {p['threshold']:,} "
        f"tokens (70 % of a {p['window']:,}-token window) it proposes a compaction with a "
        f"{p['summary_budget']:,}-token summary written by an extractive LexRank summarizer. "
        "*naive* summarizes everything not yet compacted and reports it all as consumed, its output cut "
        "at the budget; *planned* summarizes exactly the range `compaction-plan` returns; *anchored* does "
        "the same but keeps each turn's anchors first (for every turn the fewest of its own fragments "
        "that carry all its anchors, cheapest turns first; LexRank fills the rest). After a rejection or an "
        f"empty plan it waits {p['wait_turns']} turns. At the end every turn is reconstructed and an "
        "oracle that does not use the service's code judges each claim: a turn answered from a summary "
        "is *backed* when its key fact (its rarest content word in the session) is in that summary.",
        "",
        "## Figures",
        "",
        *metrics_table(files),
        "",
        "Ratios are pooled over all sessions (summed counts, then divided), except the working context, "
        "a mean of per-session shares.",
        "",
        "## Derived anchors by role",
        "",
        "Of the turns with at least one content word (the oracle's definition), the share whose append "
        "answer gave at least one anchor.",
        "",
        *anchor_table(files),
        "",
        "## Observations",
        "",
    ]
    for f in files:
        if len(files) > 1:
            parts.append(f"**{f['_name']}**")
            parts.append("")
        parts.extend(observations(f))
        parts.append("")
    if notes:
        parts.extend([notes.strip(), ""])
    parts.extend([
        "## Runs",
        "",
        *run_table(files),
        "",
        f"Parameters: window {p['window']:,} tokens, compaction above {p['threshold']:,}, summary budget "
        f"{p['summary_budget']:,} (at most {p['max_raised_budget']:,} when the plan advises `raise_budget`), "
        f"{p['wait_turns']} turns of waiting after a rejection, an empty plan or the advice `wait`, "
        f"fragments of at most {p['max_fragment_chars']} characters, sessions of at least "
        f"{files[0]['meta']['data']['min_session_turns']} turns.",
        "",
    ])
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, nargs="+", help="one or two results files (before, after)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--notes", type=Path, default=None, help="Markdown to add under the observations")
    args = ap.parse_args(argv)
    if len(args.results) > 2:
        ap.error("at most two results files: before and after")
    files = [load(p) for p in args.results]
    notes = args.notes.read_text() if args.notes else None
    args.out.write_text(render(files, notes))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
