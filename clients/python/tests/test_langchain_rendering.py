"""Rendering a working context for a chat model (summaries, stubs, tool calls kept paired with
their results) and the recall tools, against the real service."""

from __future__ import annotations

import json

import pytest
from conftest import Service, tau_turns
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_support import TAU, assert_tool_pairs_valid

from gatekeeper_client import Gatekeeper
from gatekeeper_client.langchain import (
    context_messages,
    gatekeeper_tools,
    message_role,
    message_text,
)

# --- rendering a working context ---------------------------------------------------------------


def _narrowed(client: Gatekeeper, conversation: str) -> list[BaseMessage]:
    """Four turns, a checkpoint over all of them whose summary leaves the tool result (turn 2)
    out; the agent's messages for them."""
    flights = [
        {"flight_number": f"HAT{n:03}", "date": "2024-05-15", "price": 100 + n} for n in range(40)
    ]
    tool_output = json.dumps(
        {"reservation_id": "ZFA04Y", "status": "cancelled", "refund": 312, "flights": flights}
    )
    messages: list[BaseMessage] = [
        HumanMessage("I want to cancel reservation ZFA04Y, flight HAT170 on 2024-05-15.", id="u"),
        AIMessage(
            "",
            tool_calls=[{"name": "cancel_reservation", "args": {"id": "ZFA04Y"}, "id": "c"}],
            id="a",
        ),
        ToolMessage(tool_output, tool_call_id="c", id="t"),
        AIMessage("Done: ZFA04Y is cancelled and 312 USD will be refunded.", id="d"),
    ]
    client.append(
        conversation, [{"role": message_role(m), "content": message_text(m)} for m in messages]
    )
    plan = client.plan(conversation, 2000)
    kept = [a for t in plan.turns if t.id != 2 for a in t.anchors]
    client.propose(conversation, 0, 3, "Summary: " + ", ".join(kept) + ".", 2000)
    return messages


def test_a_tool_result_whose_call_was_summarized_becomes_plain_text(service: Service) -> None:
    client = Gatekeeper(service.url, service.key)
    messages = _narrowed(client, "render")
    rendered = context_messages(client.context("render"), dict(enumerate(messages)))
    assert [type(m) for m in rendered] == [HumanMessage, HumanMessage]
    summary, tool = rendered
    assert "summary of turns 0-1, 3" in summary.text
    assert tool.text == f"[Turn 2: tool result]\n{messages[2].text}"
    assert_tool_pairs_valid(rendered)


def test_a_stub_says_the_turn_exists_and_how_to_recall_it(service: Service) -> None:
    client = Gatekeeper(service.url, service.key)
    messages = _narrowed(client, "stubbed")
    context = client.context("stubbed", max_tokens=200)
    rendered = context_messages(context, dict(enumerate(messages)))
    stub = rendered[-1]
    assert isinstance(stub, HumanMessage)
    assert "Turn 2 (tool" in stub.text and "recall_turn(turn=2)" in stub.text
    assert messages[2].text not in stub.text  # a preview, not the turn
    assert count_tokens_approximately(rendered) < count_tokens_approximately(messages)


def test_verbatim_turns_are_the_agents_own_messages_with_their_tool_calls(
    service: Service,
) -> None:
    client = Gatekeeper(service.url, service.key)
    messages = _narrowed(client, "own")
    messages += [
        AIMessage("", tool_calls=[{"name": "get_refund", "args": {"id": "ZFA04Y"}, "id": "r"}]),
        ToolMessage('{"refund": 312, "currency": "USD"}', tool_call_id="r"),
        HumanMessage("And when will it arrive?"),
    ]
    client.append(
        "own", [{"role": message_role(m), "content": message_text(m)} for m in messages[4:]]
    )
    originals = dict(enumerate(messages))
    originals[6] = HumanMessage("Some other text")  # not what the log holds for turn 6
    rendered = context_messages(client.context("own"), originals)
    call, result, question = rendered[-3:]
    assert call is messages[4] and result is messages[5]
    assert type(question) is HumanMessage and question.text == "And when will it arrive?"
    assert_tool_pairs_valid(rendered)


# --- the tools ---------------------------------------------------------------------------------


@pytest.fixture
def logged(service: Service) -> tuple[Gatekeeper, list[dict]]:
    client = Gatekeeper(service.url, service.key)
    turns = tau_turns(TAU)
    client.append("tools", turns)
    return client, turns


def test_recall_turn_returns_the_raw_turn_text(logged: tuple[Gatekeeper, list[dict]]) -> None:
    client, turns = logged
    recall, _ = gatekeeper_tools(client, "tools")
    answer = json.loads(recall.invoke({"turn": 7}))
    assert answer == {"turn": 7, "role": "tool", "source": "live", "text": turns[7]["content"]}
    error = recall.invoke({"turn": 10_000})  # a tool error the agent reads, not an exception
    assert error.startswith("404") and "not in the log" in error


def test_search_history_finds_a_turn_by_a_word_in_it(logged: tuple[Gatekeeper, list[dict]]) -> None:
    client, turns = logged
    _, search = gatekeeper_tools(client, "tools")
    holders = {i for i, t in enumerate(turns) if "HAT136" in t["content"]}
    answer = json.loads(search.invoke({"query": "HAT136"}))
    found = {h["turn"] for h in answer["hits"]}
    assert found and found <= holders
    assert all("HAT136" in h["snippet"] for h in answer["hits"])
    first = answer["hits"][0]
    assert first["role"] == turns[first["turn"]]["role"] and first["source"] == "live"
