"""GatekeeperSession against the real service, driven by the real Agents SDK Runner: a scripted
model replays tau-bench (see ``openai_agents_support``) through the session, and the context it
is sent back is compacted, summarized and stubbed, with calls and their outputs kept whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import tau_conversation
from openai_agents_support import (
    ANSWER,
    BIG_OUTPUT,
    CALL,
    OUTPUT,
    USER,
    RecordingSession,
    assert_pairs_whole,
    async_keep_anchors,
    dumps,
    is_summary,
    item_turns,
    keep_anchors,
    raw_log,
    readable,
    replay,
)

from gatekeeper_client import AsyncGatekeeper
from gatekeeper_client.openai_agents import EXT_JSON, GatekeeperSession, decode_turn


@pytest.fixture
async def gk(service) -> AsyncIterator[AsyncGatekeeper]:
    async with AsyncGatekeeper(service.url, api_key=service.key) as client:
        yield client


# --- storing, through the Runner -----------------------------------------------------------------


async def test_every_item_a_tau_bench_run_adds_is_in_the_raw_log_exactly_once_as_readable_text(gk):
    session = RecordingSession("tau-raw-2", gk)
    await replay(session, 2)
    kinds = {i.get("type", "message") for i in session.added}
    assert {"message", "function_call", "function_call_output"} <= kinds

    log = await raw_log(gk, "tau-raw-2")
    assert len(log) == len(session.added)
    for turn, item in zip(log, session.added, strict=True):
        assert turn.content == readable(item)  # byte-exact, and what a person would read
        assert turn.external_id != EXT_JSON
        back = decode_turn(turn.id, turn.role.value, turn.content, turn.external_id).item
        assert dumps(back) == dumps(item)  # the exact item, key order included
        expected_role = {"function_call": "assistant", "function_call_output": "tool"}.get(
            item.get("type"), item.get("role")
        )
        assert turn.role.value == expected_role
    users = [t["content"] for t in tau_conversation(2) if t["role"] == "user"]
    contents = [t.content for t in log]
    assert all(contents.count(u) == 1 for u in users)


async def test_get_items_gives_back_exactly_the_items_the_sdk_added_while_nothing_is_compacted(gk):
    session = RecordingSession("tau-round-0", gk)
    model = await replay(session, 0)
    items = await session.get_items()
    assert dumps(items) == dumps(session.added)
    # The SDK sent the model that history: the last call's input is all of it but the answer.
    assert dumps(model.inputs[-1]) == dumps(session.added[:-1])
    # A fresh process (no cache) reads the same items from the service alone.
    fresh = GatekeeperSession("tau-round-0", gk)
    assert dumps(await fresh.get_items()) == dumps(session.added)
    # limit: exactly the last N, as SQLiteSession answers (the SDK compares such tails with what
    # it added to reconcile and rewind its writes), even where the cut separates a pair.
    for n in range(len(session.added) + 2):
        assert dumps(await fresh.get_items(limit=n)) == dumps(session.added[-n:] if n else [])


# --- compaction ----------------------------------------------------------------------------------


@pytest.mark.parametrize("summarizer", [keep_anchors, async_keep_anchors], ids=["sync", "async"])
async def test_a_long_tau_bench_session_is_compacted_and_the_model_then_sees_the_summary(
    gk, summarizer
):
    calls: list[tuple[list[dict[str, Any]], list[str], int]] = []

    def spy(turns, must_keep, budget):
        calls.append((turns, must_keep, budget))
        return summarizer(turns, must_keep, budget)

    async def async_spy(turns, must_keep, budget):
        calls.append((turns, must_keep, budget))
        return await summarizer(turns, must_keep, budget)

    conv = f"tau-compact-3-{summarizer.__name__}"
    session = RecordingSession(
        conv, gk, summarizer=async_spy if summarizer is async_keep_anchors else spy,
        summary_budget=600, compact_at=3000,
    )  # fmt: skip
    model = await replay(session, 3)

    assert calls, "the summarizer was asked"
    turns, must_keep, budget = calls[0]
    assert budget == 600 and must_keep
    log = await raw_log(gk, conv)
    by_id = {t.id: t for t in log}
    assert all(t["content"] == by_id[t["id"]].content for t in turns)  # readable raw text

    assert session.last_verdict is not None and session.last_verdict.checkpoint_id
    outcomes = [c.outcome.value for c in (await gk.checkpoints(conv)).checkpoints]
    assert "accepted" in outcomes, outcomes
    # Compaction never loses the raw log: every item still there, once.
    assert len(item_turns(log)) == len(session.added)

    items = await session.get_items()
    assert len(items) < len(session.added)
    assert any(is_summary(i) for i in items)
    assert_pairs_whole(items)
    # The Runner used the compacted context: later model inputs carry the summary.
    assert any(is_summary(i) for i in model.inputs[-1])
    assert len(model.inputs[-1]) < len(session.added)
    for sent in model.inputs:
        assert_pairs_whole(sent)
    # Within a small budget, the uncovered spanned turns turn into stubs; pairs stay whole.
    tight = GatekeeperSession(conv, gk, max_tokens=1)
    assert_pairs_whole(await tight.get_items())


async def test_a_rejected_compaction_is_logged_and_the_items_are_still_stored(gk, caplog):
    session = RecordingSession(
        "tau-reject", gk, summarizer=lambda turns, must_keep, budget: "Nothing to see here.",
        summary_budget=300, compact_at=500,
    )  # fmt: skip
    await replay(session, 2, runs=4)
    assert session.last_verdict is not None
    assert session.last_verdict.outcome.value == "rejected"
    assert "rejected" in caplog.text
    assert (await gk.conversation("tau-reject")).checkpoints == 0
    assert dumps(await session.get_items()) == dumps(session.added)


# --- calls and outputs in the context ------------------------------------------------------------


async def test_a_call_whose_output_stands_alone_is_text_and_no_output_is_left_without_its_call(gk):
    session = GatekeeperSession("split-summary", gk)
    await session.add_items([USER, CALL, OUTPUT, ANSWER])
    # A summary that covers the call (turn 1) only: the output stays as itself.
    verdict = await gk.propose("split-summary", 1, 1, f"Ran {readable(CALL)}.", 200)
    assert verdict.covered == [[1, 1]]
    items = await session.get_items()
    assert [i.get("type") for i in items].count("function_call_output") == 0
    note = next(i for i in items if "call_1" in str(i.get("content")))
    assert note["content"] == f"[result of tool call call_1] {BIG_OUTPUT}"
    assert_pairs_whole(items)
    assert (
        dumps(items[0]) == dumps(USER)
        and is_summary(items[1])
        and dumps(items[-1]) == dumps(ANSWER)
    )


async def test_a_call_whose_output_became_a_stub_is_text_and_its_reasoning_goes_with_it(gk):
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Checking the directory quickly."}],
    }
    session = GatekeeperSession("split-stub", gk, max_tokens=300)
    await session.add_items([USER, reasoning, CALL, OUTPUT, ANSWER])
    # A checkpoint spanning 0..3 that covers only the user turn: reasoning, call and output stay
    # uncovered, and within 300 tokens the big output is a stub.
    verdict = await gk.propose("split-stub", 0, 3, f"User said: {USER['content']}", 1000)
    assert verdict.covered == [[0, 0]]
    items = await session.get_items()
    kinds = [i.get("type") for i in items]
    assert "function_call" not in kinds and "function_call_output" not in kinds
    assert "reasoning" not in kinds
    assert any(i["content"] == f"[tool call call_1] {readable(CALL)}" for i in items)
    stub = next(i for i in items if str(i["content"]).startswith("[Turn 3 "))
    assert "/v1/conversations/split-stub/reconstruct/3" in stub["content"]
    assert dumps(items[-1]) == dumps(ANSWER)


async def test_a_pending_call_at_the_end_is_kept_as_a_call(gk):
    session = GatekeeperSession("pending", gk)
    await session.add_items([USER, CALL])
    assert dumps(await session.get_items()) == dumps([USER, CALL])
    await session.add_items([OUTPUT])
    assert dumps(await session.get_items()) == dumps([USER, CALL, OUTPUT])
