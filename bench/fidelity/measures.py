"""What the runs are worth: the oracle's judgement of every claim, and the counts around it.

`measure(run)` turns one (session, strategy) run into plain counts; `aggregate` adds the counts
of many runs and only then divides, so a short session weighs as much as its turns.
"""

from __future__ import annotations

from collections import Counter

import oracle
from agent import BUDGET, THRESHOLD, WINDOW, Run

EXAMPLES_PER_RUN = 3


def measure(run: Run) -> dict:
    facts = oracle.session_facts(run.texts)
    counts: Counter = Counter()
    counts.update(claims(run, facts))
    counts.update(baseline(run, facts))
    counts.update(yields(run))
    counts.update(fall_through(run))
    counts.update(proposal_counts(run))
    counts.update({f"pause_{reason}": n for reason, n in run.pauses.items()})
    counts.update({f"advice_{name}": n for name, n in run.advice_seen.items()})
    counts.update({f"advice_reason_{name}": n for name, n in run.advice_reasons.items()})
    counts.update({f"final_context_{part}_tokens": n for part, n in run.final_context_parts.items()})
    counts.update(
        turns=len(run.texts),
        raw_tokens=sum(run.tokens),
        final_context_tokens=run.final_context_tokens,
        token_mismatches=run.token_mismatches,
        budget_raises=run.budget_raises,
        plans_with_turn_anchors=run.plan_turns_anchors,
        window_filled_appends=run.window_filled,
        window_never_filled=int(run.peak_context <= THRESHOLD),
        final_context_over_window=int(run.final_context_tokens > WINDOW),
        budgeted_context_tokens=run.budgeted_context_tokens,
        budgeted_context_over_window=int(not run.budgeted_context_fits),
        budgeted_context_stubs=run.budgeted_context_stubs,
    )
    return {
        "strategy": run.strategy,
        "session": run.session,
        "conversation": run.conversation,
        "final_context_share": ratio(run.final_context_tokens, sum(run.tokens)),
        "budgeted_context_share": ratio(run.budgeted_context_tokens, sum(run.tokens)),
        "peak_context_tokens": run.peak_context,
        "counts": dict(counts),
        "unbacked_examples": unbacked_examples(run, facts),
    }


def backed(facts: list[str], summary: str) -> tuple[bool, bool]:
    """(key fact in the summary, all top-3 facts in it); a turn with no content word is backed."""
    if not facts:
        return True, True
    lower = summary.lower()
    return oracle.fact_in(facts[0], lower), all(oracle.fact_in(f, lower) for f in facts[:3])


def claims(run: Run, facts: list[list[str]]) -> Counter:
    """The service's claims: every turn reconstructed from a summary at the end.

    Claims made by checkpoints of a single turn are counted apart too: once an orchestrator has
    caught up with the live tail it compacts one turn at a time, and a one-turn extractive
    summary is the turn itself, which says little about how summaries lose facts.
    """
    single = {p.verdict.get("checkpoint_id") for p in run.proposals if p.from_ == p.to}
    c: Counter = Counter()
    for answer in run.reconstruct:
        if answer["source"] != "summary":
            continue
        turn = answer["turn"]
        key, top3 = backed(facts[turn], answer["text"])
        c["claimed"] += 1
        c["claimed_key_backed"] += key
        c["claimed_top3_backed"] += top3
        c["claimed_without_facts"] += not facts[turn]
        if answer["checkpoint_id"] not in single:
            c["claimed_multi"] += 1
            c["claimed_multi_key_backed"] += key
    return c


def baseline(run: Run, facts: list[list[str]]) -> Counter:
    """An ungated orchestrator's claims: each proposal claims its whole [from, to]; the newest
    proposal that claims a turn decides it (rejected proposals too: nobody would have said no)."""
    decider: dict[int, str] = {}
    for p in run.proposals:
        for turn in range(p.from_, p.to + 1):
            decider[turn] = p.summary
    c: Counter = Counter()
    for turn, summary in decider.items():
        key, top3 = backed(facts[turn], summary)
        c["baseline_claimed"] += 1
        c["baseline_key_backed"] += key
        c["baseline_top3_backed"] += top3
        c["baseline_without_facts"] += not facts[turn]
    return c


def unbacked_examples(run: Run, facts: list[list[str]]) -> list[dict]:
    """The first few claims whose key fact is missing, to read rather than to count."""
    out = []
    for answer in run.reconstruct:
        turn = answer["turn"]
        if answer["source"] == "summary" and not backed(facts[turn], answer["text"])[0]:
            out.append({
                "turn": turn,
                "role": run.roles[turn],
                "anchors": run.anchors[turn],
                "top3_facts": facts[turn][:3],
                "text": run.texts[turn][:240],
            })
            if len(out) == EXAMPLES_PER_RUN:
                break
    return out


def yields(run: Run) -> Counter:
    asked = sum(p.to - p.from_ + 1 for p in run.proposals)
    distinct = len({t for p in run.proposals for t in range(p.from_, p.to + 1)})
    covered = sum(1 for a in run.reconstruct if a["source"] == "summary")
    return Counter(asked_turns=asked, asked_distinct_turns=distinct, covered_turns=covered)


def fall_through(run: Run) -> Counter:
    """Answers from the raw log or the live tail must be the appended text, byte for byte."""
    c: Counter = Counter()
    for answer in run.reconstruct:
        if answer["source"] in ("raw_log", "live"):
            c[f"source_{answer['source']}"] += 1
            c["fall_through_mismatches"] += answer["text"] != run.texts[answer["turn"]]
        else:
            c["source_summary"] += 1
    return c


def proposal_counts(run: Run) -> Counter:
    c: Counter = Counter(proposals=len(run.proposals))
    for p in run.proposals:
        v = p.verdict
        c["single_turn_proposals"] += p.from_ == p.to
        if v.get("checkpoint_id") is not None:
            # What persisted checkpoints saved: their summaries against the ranges they replace.
            # Only covered turns leave the working context, while the whole summary enters it.
            summary_tokens = v.get("summary_tokens") or 0
            covered_tokens = sum(run.tokens[t] for a, b in v.get("covered") or [] for t in range(a, b + 1))
            c["persisted_summary_tokens"] += summary_tokens
            c["persisted_prefix_tokens"] += v.get("prefix_tokens") or 0
            c["net_tokens_saved"] += covered_tokens - summary_tokens
            c["checkpoints_growing_context"] += covered_tokens < summary_tokens
        c[f"outcome_{v.get('outcome', 'unknown')}"] += 1
        c["checkpoints"] += v.get("checkpoint_id") is not None
        c["truncated_verdicts"] += bool(v.get("truncated"))
        c["summary_token_mismatches"] += v.get("summary_tokens") not in (None, p.summary_tokens)
        c["raised_budget_proposals"] += p.budget != BUDGET
    return c


def anchor_rates(run: Run) -> Counter:
    """Per role: turns with a content word, and of those, turns the service gave an anchor."""
    c: Counter = Counter()
    for text, role, anchors in zip(run.texts, run.roles, run.anchors):
        if oracle.content_words(text):
            c[f"{role}_with_facts"] += 1
            c[f"{role}_anchored"] += bool(anchors)
    return c


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def aggregate(measured: list[dict]) -> dict:
    """Counts summed over a strategy's sessions, and the ratios the report shows."""
    total: Counter = Counter()
    for m in measured:
        total.update(m["counts"])
    shares = [m["final_context_share"] for m in measured if m["final_context_share"] is not None]
    budgeted = [m["budgeted_context_share"] for m in measured if m.get("budgeted_context_share") is not None]
    return {
        "sessions": len(measured),
        "claim_precision_key": ratio(total["claimed_key_backed"], total["claimed"]),
        "claim_precision_top3": ratio(total["claimed_top3_backed"], total["claimed"]),
        "claim_precision_key_multi_turn": ratio(total["claimed_multi_key_backed"], total["claimed_multi"]),
        "baseline_precision_key": ratio(total["baseline_key_backed"], total["baseline_claimed"]),
        "baseline_precision_top3": ratio(total["baseline_top3_backed"], total["baseline_claimed"]),
        "yield": ratio(total["covered_turns"], total["asked_turns"]),
        "yield_distinct": ratio(total["covered_turns"], total["asked_distinct_turns"]),
        "final_context_share_mean": ratio(sum(shares), len(shares)),
        "final_context_share_pooled": ratio(total["final_context_tokens"], total["raw_tokens"]),
        "budgeted_context_share_mean": ratio(sum(budgeted), len(budgeted)) if budgeted else None,
        "turns_per_proposal": ratio(total["asked_turns"], total["proposals"]),
        "summary_to_range_tokens": ratio(total["persisted_summary_tokens"], total["persisted_prefix_tokens"]),
        "counts": dict(total),
    }
