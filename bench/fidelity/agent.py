"""The orchestrator: appends a session turn by turn and compacts when the window fills.

Each strategy runs the same session on its own conversation. The loop records everything the
measures need (what it asked, what the service answered, what it summarized), and judges
nothing: `measures.py` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

import summarizer as S
import tokens
from data import Session
from service import Client

WINDOW = 20_000
THRESHOLD = int(WINDOW * 0.70)  # compact once the working context is above 14,000 tokens
BUDGET = 1_024
WAIT_TURNS = 10  # after a rejection or an empty plan, let this many turns pass before retrying
MAX_BUDGET = 4 * BUDGET  # the most a `raise_budget` advice may raise the budget to
STRATEGIES = ("naive", "planned", "anchored")


@dataclass
class Proposal:
    """One compaction proposal as sent, and the service's verdict on it."""

    from_: int
    to: int
    budget: int
    summary: str
    summary_tokens: int  # counted on the client
    finish_reason: str
    status: int
    verdict: dict


@dataclass
class Run:
    """Everything one (session, strategy) run saw."""

    strategy: str
    session: int
    conversation: str
    texts: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # as the service counted them
    anchors: list[list[str]] = field(default_factory=list)  # as the append answers gave them
    token_mismatches: int = 0  # turns the client counted differently from the service
    proposals: list[Proposal] = field(default_factory=list)
    pauses: dict[str, int] = field(default_factory=dict)  # why the orchestrator waited
    budget_raises: int = 0
    plan_turns_anchors: int = 0  # plans whose answer carried per-turn anchors
    advice_seen: dict[str, int] = field(default_factory=dict)
    advice_reasons: dict[str, int] = field(default_factory=dict)  # "<advice>_<advice_reason>"
    window_filled: int = 0  # appends after which the context was above the threshold
    peak_context: int = 0
    final_context_tokens: int = 0
    budgeted_context_tokens: int = 0  # the final context with max_tokens = WINDOW
    budgeted_context_fits: bool = False
    budgeted_context_stubs: int = 0
    final_context_parts: dict[str, int] = field(default_factory=dict)  # tokens: summary, raw_log, live
    reconstruct: list[dict] = field(default_factory=list)  # one answer per turn, at the end


class Orchestrator:
    def __init__(self, client: Client, summarizer: S.Summarizer, strategy: str, session: Session) -> None:
        self.client = client
        self.summarizer = summarizer
        self.strategy = strategy
        self.session = session
        name = f"fid-{strategy}-{session.index}"
        self.run = Run(strategy, session.index, name)
        self.base = f"/v1/conversations/{quote(name)}"
        self.paused_until = 0  # no compaction attempt before this turn id

    # -- the loop ----------------------------------------------------------------------------

    def play(self) -> Run:
        for turn_id, turn in enumerate(self.session.turns):
            self.append(turn_id, turn.role, turn.text)
            if turn_id < self.paused_until:
                continue
            context = self.client.get(f"{self.base}/context").body["total_tokens"]
            self.run.peak_context = max(self.run.peak_context, context)
            if context > THRESHOLD:
                self.run.window_filled += 1
                self.compact(turn_id)
        self.finish()
        return self.run

    def append(self, turn_id: int, role: str, text: str) -> None:
        # Explicit ids: a resent append is an idempotent replay, never a duplicate turn.
        body = {"turns": [{"id": turn_id, "role": role, "content": text}]}
        answer = self.client.post(f"{self.base}/turns", body)
        if answer.status not in (200, 201):
            raise RuntimeError(f"append {turn_id}: {answer.status} {answer.body}")
        stored = answer.body["turns"][0]
        self.run.texts.append(text)
        self.run.roles.append(role)
        self.run.tokens.append(stored["tokens"])
        self.run.anchors.append(list(stored.get("anchors") or []))
        if tokens.count(text) != stored["tokens"]:
            self.run.token_mismatches += 1

    def pause(self, turn_id: int, reason: str) -> None:
        self.paused_until = turn_id + 1 + WAIT_TURNS
        self.run.pauses[reason] = self.run.pauses.get(reason, 0) + 1

    # -- one compaction ------------------------------------------------------------------------

    def compact(self, last: int) -> None:
        if self.strategy == "naive":
            self.compact_naive(last)
        else:
            self.compact_planned(last)

    def compact_naive(self, last: int) -> None:
        """Everything not compacted yet, in one summary cut at the budget, all of it reported."""
        start = self.next_uncompacted()
        if start > last:
            self.pause(last, "nothing_to_compact")
            return
        summary = S.naive(self.summarizer, self.range_turns(start, last), BUDGET)
        self.propose(last, start, last, BUDGET, summary, consumed=[[start, last]])

    def compact_planned(self, last: int) -> None:
        plan, budget = self.plan(BUDGET)
        advice = advice_of(plan)
        if advice == "raise_budget" and budget < MAX_BUDGET:
            raised = min(MAX_BUDGET, max(2 * budget, int(plan.get("required_budget") or 0)))
            self.run.budget_raises += 1
            plan, budget = self.plan(raised)
            advice = advice_of(plan)
        if advice in ("wait", "raise_budget"):
            self.pause(last, f"advice_{advice}")
            return
        if plan.get("to") is None:
            self.pause(last, "plan_empty")
            return
        start, end = plan["from"], plan["to"]
        turns = self.range_turns(start, end)
        if self.strategy == "planned":
            summary = S.planned(self.summarizer, turns, budget)
        else:
            summary = S.anchored(self.summarizer, turns, budget, self.anchors_for(plan, start, end))
        self.propose(last, start, end, budget, summary, consumed=None)

    def plan(self, budget: int) -> tuple[dict, int]:
        answer = self.client.get(f"{self.base}/compaction-plan?summary_budget={budget}")
        if answer.status != 200:
            raise RuntimeError(f"plan: {answer.status} {answer.body}")
        advice = advice_of(answer.body)
        if advice:
            self.run.advice_seen[advice] = self.run.advice_seen.get(advice, 0) + 1
            reason = answer.body.get("advice_reason")
            if isinstance(reason, str):
                key = f"{advice}_{reason}"
                self.run.advice_reasons[key] = self.run.advice_reasons.get(key, 0) + 1
        return answer.body, budget

    def anchors_for(self, plan: dict, start: int, end: int) -> dict[int, list[str]]:
        """The plan's per-turn anchors when it gives them (since issue 11), else the
        anchors each turn got in its append answer."""
        listed = plan.get("turns")
        if isinstance(listed, list) and listed:
            self.run.plan_turns_anchors += 1
            return {int(t["id"]): list(t.get("anchors") or []) for t in listed if "id" in t}
        return {i: self.run.anchors[i] for i in range(start, end + 1)}

    def propose(self, last: int, start: int, end: int, budget: int, summary: S.Summary, consumed) -> None:
        body = {
            "from": start,
            "to": end,
            "summary": summary.text,
            "summary_budget": budget,
            "finish_reason": summary.finish_reason,
        }
        if consumed is not None:
            body["consumed"] = consumed
        key = f"{self.run.conversation}-{len(self.run.proposals)}"
        answer = self.client.post(f"{self.base}/compactions", body, idempotency_key=key)
        if answer.status == 422 and "outcome" not in answer.body:
            # Malformed, not rejected: a bug in this benchmark, not a finding.
            raise RuntimeError(f"compaction [{start}, {end}] refused: {answer.body}")
        if answer.status not in (200, 201, 422):
            raise RuntimeError(f"compaction [{start}, {end}]: {answer.status} {answer.body}")
        self.run.proposals.append(
            Proposal(start, end, budget, summary.text, tokens.count(summary.text),
                     summary.finish_reason, answer.status, answer.body)
        )
        if answer.status == 422:
            self.pause(last, "rejected")

    # -- helpers -------------------------------------------------------------------------------

    def next_uncompacted(self) -> int:
        latest = self.client.get(self.base).body.get("latest_checkpoint")
        return latest["advanced_to"] + 1 if latest else 0

    def range_turns(self, start: int, end: int) -> list[S.RangeTurn]:
        return [S.RangeTurn(i, self.run.roles[i], self.run.texts[i]) for i in range(start, end + 1)]

    def finish(self) -> None:
        """The end of the session: the working context, and every turn reconstructed."""
        context = self.client.get(f"{self.base}/context").body
        self.run.final_context_tokens = context["total_tokens"]
        for item in context["items"]:
            part = "summary" if item["type"] == "summary" else item.get("source", "turn")
            self.run.final_context_parts[part] = self.run.final_context_parts.get(part, 0) + item["tokens"]
        # The same context within the agent's window: stubs for the turns that do not fit.
        budgeted = self.client.get(f"{self.base}/context?max_tokens={WINDOW}").body
        self.run.budgeted_context_tokens = budgeted["total_tokens"]
        self.run.budgeted_context_fits = budgeted["fits"]
        self.run.budgeted_context_stubs = sum(1 for i in budgeted["items"] if i["type"] == "stub")
        for turn_id in range(len(self.run.texts)):
            answer = self.client.get(f"{self.base}/reconstruct/{turn_id}")
            if answer.status != 200:
                raise RuntimeError(f"reconstruct {turn_id}: {answer.status} {answer.body}")
            self.run.reconstruct.append(answer.body)


def advice_of(plan: dict) -> str | None:
    """The plan's `advice` (since issue 11): a plain string, or an object naming it."""
    advice = plan.get("advice")
    if isinstance(advice, dict):
        advice = advice.get("action") or advice.get("kind") or advice.get("advice")
    return advice if isinstance(advice, str) else None


def play(client: Client, summarizer: S.Summarizer, strategy: str, session: Session) -> Run:
    return Orchestrator(client, summarizer, strategy, session).play()
