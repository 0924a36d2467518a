"""The LangChain middleware in an agent loop: a real ``create_agent`` loop over a replayed
tau-bench conversation against the real service (see ``langchain_support``), and the middleware
called directly where the case needs messages of its own (a lost append answer, a large turn).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conftest import Service, tau_turns
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_support import (
    TAU,
    AnchorEcho,
    RecordingGatekeeper,
    ReplayModel,
    Run,
    assert_tool_pairs_valid,
    without_system,
)

from gatekeeper_client import Gatekeeper
from gatekeeper_client.langchain import (
    GatekeeperSummarizationMiddleware,
    context_messages,
    message_role,
    message_text,
)
from gatekeeper_client.models import VerdictResponse


@pytest.fixture
def run(service: Service) -> Run:
    return Run(service).run()


def test_the_middleware_appends_every_message_once(run: Run) -> None:
    log = run.log()
    assert len(log) == len(run.messages)
    for turn, message in zip(log, run.messages, strict=True):
        assert turn.external_id == message.id
        assert str(turn.role) == message_role(message)
        assert turn.content == message_text(message)
    # Byte-exact against the data: every user turn once, in order; tool calls written out as
    # `name(arguments)` lines, as `gatekeeper append` writes them.
    users = [t.content for t in log if str(t.role) == "user"]
    assert users == run.user_turns()
    texts = [(str(t.role), t.content) for t in log if t.content.strip()]
    expected = [(t["role"], t["content"]) for t in tau_turns(TAU)[1:]]
    assert texts == [*expected, ("assistant", "Goodbye.")]


def test_a_compaction_is_proposed_and_accepted_once_the_trigger_is_passed(run: Run) -> None:
    assert any(v.outcome == "accepted" for v in run.verdicts)
    checkpoints = run.client.checkpoints(run.conversation).checkpoints
    persisted = [v.checkpoint_id for v in run.verdicts if v.checkpoint_id]
    assert sorted(c.checkpoint_id for c in checkpoints) == sorted(persisted)
    # No summary took one of the last 4 messages (`keep`) of the call that made it: of the last
    # call, the turns before the final answer.
    assert max(c.advanced_to for c in checkpoints) < len(run.messages) - 1 - 4


def test_the_model_gets_the_working_context_after_a_compaction(run: Run) -> None:
    checkpoints = run.client.checkpoints(run.conversation).checkpoints
    summaries = [
        run.client.checkpoint(run.conversation, c.checkpoint_id).summary for c in checkpoints
    ]
    last = without_system(run.model.calls[-1])
    texts = [m.text for m in last]
    for summary in summaries:
        assert any(summary in t for t in texts), f"the model never saw summary {summary!r}"
    # It is what GET .../context answers (less the answer to this very call), the agent's own
    # messages where the context holds them verbatim, and smaller than the history it stands for.
    context = run.client.context(run.conversation)
    assert last == context_messages(context, dict(enumerate(run.messages)))[:-1]
    assert any(m.id == run.messages[-2].id for m in last)
    raw = run.messages[:-1]
    assert count_tokens_approximately(last) < count_tokens_approximately(raw) / 2
    # The agent state itself was left whole.
    assert len(run.messages) == len(run.log())


def test_every_model_call_keeps_tool_calls_paired_with_their_results(run: Run) -> None:
    assert any(isinstance(m, ToolMessage) for call in run.model.calls for m in call)
    for call in run.model.calls:
        assert_tool_pairs_valid(call)


def test_the_summarizer_prompt_lists_the_anchors_of_the_plan(run: Run) -> None:
    proposals = [(i, e[1]) for i, e in enumerate(run.client.events) if e[0] == "propose"]
    assert proposals and len(proposals) == len(run.summarizer.prompts)
    for (i, (from_, to, budget)), prompt in zip(proposals, run.summarizer.prompts, strict=True):
        plans = [e[1] for e in run.client.events[:i] if e[0] == "plan"]
        plan = next(p for p in reversed(plans) if (p.from_, p.summary_budget) == (from_, budget))
        assert plan.advice == "compact" and plan.to is not None and to <= plan.to
        listed = [t for t in plan.turns if t.id <= to and t.anchors]
        assert listed
        for t in listed:
            assert f"turn {t.id}: {json.dumps(t.anchors, ensure_ascii=False)}" in prompt
        assert f'<turn id="{from_}"' in prompt and f'<turn id="{to}"' in prompt
        assert f'<turn id="{to + 1}"' not in prompt


def test_below_the_trigger_the_model_gets_the_agent_messages_unchanged(service: Service) -> None:
    run = Run(service, trigger=("tokens", 10**9)).run()
    assert run.verdicts == [] and run.client.checkpoints(run.conversation).checkpoints == []
    last = without_system(run.model.calls[-1])
    assert [m.id for m in last] == [m.id for m in run.messages[:-1]]
    assert len(run.log()) == len(run.messages)


def test_a_restarted_middleware_does_not_append_the_logged_messages_again(
    service: Service,
) -> None:
    run = Run(service)
    users = run.user_turns()
    for text in users[:3]:
        run.say(text)
    logged = len(run.log())
    assert logged == len(run.messages)
    # A new process: a new middleware with no memory, over the same (checkpointed) agent state.
    fresh = GatekeeperSummarizationMiddleware(
        run.summarizer, client=run.client, trigger=("tokens", 1200), keep=("messages", 4),
        summary_budget=512, on_verdict=run.verdicts.append,
    )  # fmt: skip
    run.agent = run._agent(fresh)
    for text in users[3:]:
        run.say(text)
    log = run.log()
    assert len(log) == len(run.messages) > logged
    assert [t.external_id for t in log] == [m.id for m in run.messages]


async def test_the_async_agent_loop_logs_and_compacts_the_same(service: Service) -> None:
    run = Run(service)
    for text in run.user_turns():
        await run.asay(text)
    log = run.log()
    assert [t.external_id for t in log] == [m.id for m in run.messages]
    assert any(v.outcome == "accepted" for v in run.verdicts)


class LoseFirstAppendAnswer(httpx.BaseTransport):
    """Delivers the first append, then drops its answer, as a connection reset would."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.dropped = False
        self.replayed: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/turns"):
            response.read()
            if not self.dropped:
                self.dropped = True
                raise httpx.ReadError("connection reset", request=request)
            self.replayed.append(response.headers.get("idempotent-replayed"))
        return response


def test_a_retried_append_is_applied_once(service: Service) -> None:
    transport = LoseFirstAppendAnswer()
    http = httpx.Client(base_url=service.url, transport=transport)
    client = Gatekeeper(service.url, service.key, http=http)
    middleware = GatekeeperSummarizationMiddleware(
        AnchorEcho(), client=client, conversation="retried", trigger=("tokens", 10**9)
    )
    messages: list[BaseMessage] = [
        HumanMessage("Cancel reservation ZFA04Y, please.", id="m0"),
        AIMessage(
            "", tool_calls=[{"name": "cancel", "args": {"id": "ZFA04Y"}, "id": "c1"}], id="m1"
        ),
        ToolMessage('{"status": "cancelled"}', tool_call_id="c1", id="m2"),
    ]
    request = ModelRequest(model=ReplayModel(messages=iter([])), messages=messages)
    seen: list[list[BaseMessage]] = []

    def handler(r: ModelRequest) -> ModelResponse:
        seen.append(r.messages)
        return ModelResponse(result=[AIMessage("Done.")])

    with pytest.raises(httpx.ReadError):
        middleware.wrap_model_call(request, handler)
    middleware.wrap_model_call(request, handler)  # the agent retries the model call
    assert transport.replayed == ["true"]
    assert client.conversation("retried").next_id == 3
    assert client.turn("retried", 1).content == 'cancel({"id":"ZFA04Y"})'
    assert seen == [messages]


# --- a range stalled by a large turn -------------------------------------------------------------


def _flights(n: int) -> str:
    return json.dumps(
        [
            {"flight_number": f"HAT{i:03}", "origin": "JFK", "destination": "SEA",
             "date": "2024-05-15", "departure": f"{6 + i % 12:02}:00", "price": 100 + i}
            for i in range(n)
        ]
    )  # fmt: skip


def _big_tool_result() -> list[BaseMessage]:
    """A question, its call, a tool result a 100-token budget cannot take in, the answer and the
    next question: the range from the question is worth a summary only with the tool result."""
    call = {"name": "search_direct_flight", "args": {"date": "2024-05-15"}, "id": "s"}
    return [
        HumanMessage("Which flights go from JFK to SEA on 2024-05-15?", id="q"),
        AIMessage("", tool_calls=[call], id="c"),
        ToolMessage(_flights(12), tool_call_id="s", id="r"),
        AIMessage("HAT000 leaves at 06:00 for 100 USD; 11 more fly that day.", id="a"),
        HumanMessage("Book HAT000, please.", id="b"),
    ]


def _big_first_turn() -> list[BaseMessage]:
    """A first turn that alone needs more than a 100-token budget (the user pastes a schedule)."""
    return [
        HumanMessage(f"Here is the schedule I was sent: {_flights(16)}", id="p"),
        AIMessage("Thanks: 16 flights from JFK to SEA on 2024-05-15.", id="a"),
        HumanMessage("Book HAT000, please.", id="b"),
    ]


@dataclass
class Called:
    """One model call through the middleware: what the client saw, and what the model got."""

    client: RecordingGatekeeper
    model: ReplayModel
    verdicts: list[VerdictResponse]


def _call(service: Service, messages: list[BaseMessage], **kwargs: Any) -> Called:
    """One model call over ``messages``, past the trigger, the last two messages kept."""
    called = Called(
        RecordingGatekeeper(service.url, service.key), ReplayModel(messages=iter([])), []
    )
    middleware = GatekeeperSummarizationMiddleware(
        AnchorEcho(), client=called.client, conversation="stalled", trigger=("tokens", 100),
        keep=("messages", 2), summary_budget=100, on_verdict=called.verdicts.append, **kwargs,
    )  # fmt: skip

    def handler(r: ModelRequest) -> ModelResponse:
        called.model.calls.append(r.messages)
        return ModelResponse(result=[AIMessage("Done.")])

    middleware.wrap_model_call(ModelRequest(model=called.model, messages=messages), handler)
    return called


@pytest.mark.parametrize(
    ("messages", "reason", "named", "to"),
    [
        (_big_tool_result, "next_turn_over_budget", "budget_for_next_turn", 2),
        (_big_first_turn, "first_turn_over_budget", "required_budget", 0),
    ],
    ids=["tool-result-next", "first-turn"],
)
def test_a_range_stalled_by_a_large_turn_is_compacted_at_the_budget_the_plan_names(
    service: Service,
    messages: Callable[[], list[BaseMessage]],
    reason: str,
    named: str,
    to: int,
) -> None:
    called = _call(service, messages())
    stalled, raised, *_ = called.client.plans()  # then one from the turn after the range
    assert (stalled.advice, stalled.advice_reason, stalled.summary_budget) == (
        "raise_budget", reason, 100,
    )  # fmt: skip
    budget = getattr(stalled, named)
    assert isinstance(budget, int) and 100 < budget <= 400  # max_summary_budget: 4 × 100
    # One plan at the budget named, which takes the large turn in, and a proposal at it.
    assert (raised.advice, raised.summary_budget, raised.to) == ("compact", budget, to)
    assert called.client.proposals() == [(0, to, budget)]
    assert [(v.outcome, v.covered) for v in called.verdicts] == [("accepted", [[0, to]])]
    # The model got the summary in place of the large turn.
    sent = called.model.calls[-1]
    assert "summary of turns" in sent[0].text and len(sent) == len(messages()) - to
    assert all(m.id != messages()[to].id for m in sent)
    assert_tool_pairs_valid(sent)


def test_a_range_whose_next_turn_needs_more_than_max_summary_budget_waits(
    service: Service,
) -> None:
    called = _call(service, _big_tool_result(), max_summary_budget=150)
    [stalled] = called.client.plans()  # no plan at a budget over the cap
    assert stalled.advice == "raise_budget" and stalled.budget_for_next_turn > 150
    assert called.client.proposals() == [] and called.verdicts == []
    assert [m.id for m in called.model.calls[-1]] == [m.id for m in _big_tool_result()]
