"""GatekeeperSession against the real service, called as the Agents SDK calls it: the protocol's
signatures, items stored exactly, retried and concurrent appends, and pop_item, the SDK's rewind
and clear_session on an append-only log."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from agents.memory import Session, SessionABC
from openai_agents_support import ANSWER, CALL, OUTPUT, USER, dumps, item_turns, raw_log, readable

from gatekeeper_client import AsyncGatekeeper
from gatekeeper_client.openai_agents import EXT_JSON, EXT_POP, GatekeeperSession


@pytest.fixture
async def gk(service) -> AsyncIterator[AsyncGatekeeper]:
    async with AsyncGatekeeper(service.url, api_key=service.key) as client:
        yield client


# --- the protocol --------------------------------------------------------------------------------


async def test_the_session_satisfies_the_sdk_session_protocol_with_its_exact_signatures(gk):
    session = GatekeeperSession("proto", gk)
    assert isinstance(session, Session)
    assert session.session_id == "proto" and session.session_settings is not None
    for name in ("get_items", "add_items", "pop_item", "clear_session"):
        mine = inspect.signature(getattr(GatekeeperSession, name))
        theirs = inspect.signature(getattr(SessionABC, name))
        assert list(mine.parameters) == list(theirs.parameters), name
        assert inspect.iscoroutinefunction(getattr(GatekeeperSession, name)), name


# --- storing -------------------------------------------------------------------------------------


async def test_items_without_one_text_field_are_stored_as_their_exact_json(gk):
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "gAAA" * 200,
    }
    parts = {
        "role": "user",
        "content": [{"type": "input_text", "text": "two"}, {"type": "input_text", "text": "parts"}],
    }
    unicode = {"role": "user", "content": "naïve \u0000 null and emoji 🛫"}
    session = GatekeeperSession("odd-items", gk)
    await session.add_items([reasoning, parts, unicode])
    log = await raw_log(gk, "odd-items")
    assert [t.external_id for t in log[:2]] == [EXT_JSON, EXT_JSON]
    assert json.loads(log[0].content) == reasoning
    assert log[2].content == unicode["content"]
    fresh = GatekeeperSession("odd-items", gk)
    assert dumps(await fresh.get_items()) == dumps([reasoning, parts, unicode])


async def test_a_retried_add_whose_first_answer_was_lost_is_applied_once(service):
    class LoseFirstAppendAnswer(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport()
            self.appends = 0
            self.lost = 0

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self.inner.handle_async_request(request)
            if request.method == "POST" and request.url.path.endswith("/turns"):
                self.appends += 1
            if self.appends == 2 and not self.lost:  # the second append lands, its answer not
                self.lost += 1
                await response.aread()
                raise httpx.ReadTimeout("the answer was lost", request=request)
            return response

    transport = LoseFirstAppendAnswer()
    http = httpx.AsyncClient(base_url=service.url, transport=transport)
    async with AsyncGatekeeper(service.url, api_key=service.key, http=http) as gk:
        session = GatekeeperSession("retry", gk)
        await session.add_items([USER])
        with pytest.raises(httpx.ReadTimeout):
            await session.add_items([CALL, OUTPUT])  # stored, but the session never heard
        assert transport.lost == 1
        await session.add_items([CALL, OUTPUT])  # the SDK's retry
        await session.add_items([ANSWER])
        log = await raw_log(gk, "retry")
        assert [t.content for t in log] == [readable(i) for i in (USER, CALL, OUTPUT, ANSWER)]
        assert dumps(await session.get_items()) == dumps([USER, CALL, OUTPUT, ANSWER])


async def test_a_second_writer_on_the_same_session_appends_after_the_first(gk):
    a = GatekeeperSession("two-writers", gk)
    b = GatekeeperSession("two-writers", gk)
    await a.add_items([USER])
    await b.add_items([CALL, OUTPUT])  # b found next_id 1 on first use
    await a.add_items([ANSWER])  # a still thinks 1: conflict, then appended after b's
    assert dumps(await GatekeeperSession("two-writers", gk).get_items()) == dumps(
        [USER, CALL, OUTPUT, ANSWER]
    )


# --- pop and clear -------------------------------------------------------------------------------


async def test_pop_item_withdraws_the_newest_item_everywhere_but_keeps_it_in_the_raw_log(gk):
    session = GatekeeperSession("pop", gk)
    assert await session.pop_item() is None  # an empty session
    await session.add_items([USER, CALL, OUTPUT, ANSWER])
    assert dumps(await session.pop_item()) == dumps(ANSWER)
    assert dumps(await session.pop_item()) == dumps(OUTPUT)
    assert dumps(await session.get_items()) == dumps([USER, CALL])
    # Another process sees the same: the withdrawals are in the log, as pinned markers.
    fresh = GatekeeperSession("pop", gk)
    assert dumps(await fresh.get_items()) == dumps([USER, CALL])
    log = await raw_log(gk, "pop")
    assert [t.content for t in item_turns(log)] == [
        readable(i) for i in (USER, CALL, OUTPUT, ANSWER)
    ]
    markers = [t for t in log if t.external_id and t.external_id.startswith(EXT_POP)]
    assert [m.external_id for m in markers] == [f"{EXT_POP}3", f"{EXT_POP}2"]
    assert all(m.pinned for m in markers)
    # The SDK's restore after a failed rewind: the popped item added back is live again.
    await fresh.add_items([OUTPUT])
    assert dumps(await session.get_items()) == dumps([USER, CALL, OUTPUT])
    assert dumps(await session.pop_item()) == dumps(OUTPUT)
    assert dumps(await session.pop_item()) == dumps(CALL)
    assert dumps(await session.pop_item()) == dumps(USER)
    assert await session.pop_item() is None
    assert await fresh.get_items() == []


async def test_the_sdks_own_rewind_pops_the_tail_it_added_and_leaves_another_tail_alone(gk):
    try:  # the helper the Runner rewinds a retried turn with (not public API)
        from agents.run_internal.session_persistence import rewind_session_items
    except ImportError:  # pragma: no cover - moved in another SDK version
        pytest.skip("this SDK has no rewind_session_items")
    session = GatekeeperSession("rewind", gk)
    await session.add_items([USER, CALL, OUTPUT, ANSWER])
    await rewind_session_items(session, [OUTPUT, ANSWER])
    assert dumps(await session.get_items()) == dumps([USER, CALL])
    await rewind_session_items(session, [ANSWER])  # not the tail: nothing is popped
    assert dumps(await session.get_items()) == dumps([USER, CALL])


async def test_clear_session_starts_an_empty_generation_and_keeps_the_old_history(gk):
    session = GatekeeperSession("clear", gk)
    await session.add_items([USER, ANSWER])
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.conversation() == "clear:gen2"
    await session.add_items([USER])
    fresh = GatekeeperSession("clear", gk)
    assert await fresh.conversation() == "clear:gen2"
    assert dumps(await fresh.get_items()) == dumps([USER])
    old = await raw_log(gk, "clear")
    assert [t.content for t in old] == [readable(USER), readable(ANSWER)]
    await fresh.clear_session()
    assert await GatekeeperSession("clear", gk).conversation() == "clear:gen3"
