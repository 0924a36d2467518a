"""One compaction's plan and summary: the budget and range the gatekeeper plans, and the prompt
the summarizer writes it from."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from .._client import Gatekeeper
from .._generated.models.advice import Advice
from .._generated.models.advice_reason import AdviceReason
from .._generated.models.compaction_plan_response import CompactionPlanResponse
from ..errors import ProblemError
from ._log import valid_label
from ._messages import message_role, message_text

logger = logging.getLogger(__package__)  # the package's logger: the name users filter on

DEFAULT_SUMMARY_PROMPT = """<role>
Context Extraction Assistant
</role>

<objective>
Turns {from_} to {to} of the conversation below will be replaced, in the agent's context, by the
summary you write now. Keep what the agent needs to continue: the user's goal, decisions and their
reasons, identifiers, amounts, dates, results of tool calls, and what remains to be done.
</objective>

<rules>
- At most {budget} tokens. End on a complete sentence.
- A gatekeeper checks the summary: a turn counts as summarized only if the summary holds every
  word listed for it below, spelled as listed. A turn it does not count stays in the context word
  for word, so keep them all.
</rules>

<must_keep>
{anchors}
</must_keep>

Respond ONLY with the summary.

<messages>
{messages}
</messages>"""
"""The prompt ``model`` summarizes with. Placeholders: ``{messages}`` (the range's turns),
``{anchors}`` (one line per turn: ``turn 3: ["ZFA04Y", "HAT170"]``), ``{budget}``,
``{from_}`` and ``{to}``."""


def _raised_budget(plan: CompactionPlanResponse) -> int:
    """The budget a ``raise_budget`` plan names: the one that takes in the range's next turn, or,
    when not even ``from`` fits, what ``from`` alone needs. 0 when it names none."""
    if plan.advice_reason == AdviceReason.FIRST_TURN_OVER_BUDGET:
        return plan.required_budget
    raised = plan.budget_for_next_turn
    return raised if isinstance(raised, int) else 0


def plan_compaction(
    client: Gatekeeper, conversation: str, limit: int, budget: int, max_budget: int
) -> CompactionPlanResponse | None:
    """A plan that compacts and ends at or before ``limit``, at ``budget`` or at another budget
    up to ``max_budget``.

    Two things move the budget. A plan that advises ``raise_budget`` has a range too small to be
    worth a summary because a turn does not fit (its next one, a large tool result say, or
    ``from`` itself), so waiting cannot lengthen it; it names the budget that takes that turn in,
    and one plan is asked at that budget if it is at most ``max_budget``. A range reaching into
    the kept messages calls for a smaller budget, which plans a shorter range. The range is never
    cut short instead: the plan's anchors are those of its own range (a word is a turn's own only
    if no other turn of the range holds it), so a shorter range would be checked against anchors
    the plan did not list. No such budget: wait for more turns.
    """
    # Budgets at or below `lo` plan too small a range; at or above `hi`, one too long.
    lo, hi, raised = 0, max_budget + 1, False
    plan: CompactionPlanResponse | None = None
    for _ in range(10):
        try:
            plan = client.plan(conversation, budget)
        except ProblemError as e:
            if e.status != 404:  # 404: every turn is behind the latest checkpoint
                logger.warning("gatekeeper %s: no plan: %s", conversation, e)
            return None
        if plan.advice == Advice.COMPACT and isinstance(plan.to, int):
            if plan.to <= limit:
                return plan
            hi = budget
            wanted, span = limit - plan.from_ + 1, plan.to - plan.from_ + 1
            budget = max(lo + 1, min(budget - 1, budget * wanted // span))
        elif plan.advice == Advice.RAISE_BUDGET and not raised:
            raised, lo, budget = True, budget, _raised_budget(plan)
        else:  # wait: more turns may lengthen the range, or recent proposals were rejected
            break
        if limit < plan.from_ or not lo < budget < hi:
            break
    if plan is not None:
        logger.info(
            "gatekeeper %s: no compaction before the kept messages (turn %d): plan advises "
            "%s (%s) at a budget of %d",
            conversation, limit + 1, plan.advice, plan.advice_reason, plan.summary_budget,
        )  # fmt: skip
    return None


def finish_reason(response: BaseMessage) -> str | None:
    """The summarizer's finish reason (OpenAI ``finish_reason``, Anthropic ``stop_reason``), so the
    gatekeeper can tell a summary cut off at ``length`` / ``max_tokens``."""
    meta = response.response_metadata or {}
    reason = meta.get("finish_reason") or meta.get("stop_reason")
    return reason if isinstance(reason, str) and valid_label(reason) else None


def summarize(
    model: Runnable[Any, BaseMessage],
    template: str,
    client: Gatekeeper,
    conversation: str,
    plan: CompactionPlanResponse,
    to: int,
    by_turn: Mapping[int, BaseMessage],
) -> tuple[str, str | None]:
    """``model``'s summary of the range of ``plan`` (``to`` is its end, ``plan.to``) and its finish
    reason. ``by_turn`` holds the agent's messages by turn id."""
    parts = []
    for turn in range(plan.from_, to + 1):
        m = by_turn.get(turn)
        if m is not None:
            role, text = message_role(m), message_text(m)
        else:  # logged by another process: read it back
            stored = client.turn(conversation, turn)
            role, text = str(stored.role), stored.content
        parts.append(f'<turn id="{turn}" role="{role}">\n{text}\n</turn>')
    anchors = "\n".join(
        f"turn {t.id}: {json.dumps(list(t.anchors), ensure_ascii=False)}"
        for t in plan.turns
        if t.anchors
    )
    prompt = template.format(
        messages="\n".join(parts),
        anchors=anchors or "(none)",
        budget=plan.summary_budget,
        from_=plan.from_,
        to=to,
    )
    config: RunnableConfig = {
        "metadata": {"lc_source": "summarization"},
        "tags": [TAG_NOSTREAM],
    }
    response = model.invoke(prompt, config=config)
    return response.text.strip(), finish_reason(response)
