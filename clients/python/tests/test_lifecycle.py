"""The facade's operator half against the real service: the turn list, the conversation list,
erasure, export and import, blocking and awaitable."""

from __future__ import annotations

import json

import pytest
from conftest import tau_turns

from gatekeeper_client import AsyncGatekeeper, Gatekeeper, ProblemError
from gatekeeper_client.models import Role


def test_the_turn_list_pages_through_the_log_with_each_turns_size_and_pin(service):
    turns = tau_turns(20)
    with Gatekeeper(service.url, api_key=service.key) as gk:
        gk.append("life-20", turns)
        gk.set_pinned("life-20", 2, True)
        listed, from_ = [], 0
        while from_ is not None:
            page = gk.turns("life-20", from_=from_, limit=4)
            assert len(page.turns) <= 4
            listed += page.turns
            from_ = page.next_from if isinstance(page.next_from, int) else None
        assert [t.id for t in listed] == list(range(len(turns)))
        for t in listed:
            stored = gk.turn("life-20", t.id)
            assert (t.role, t.tokens, t.pinned) == (stored.role, stored.tokens, stored.pinned)
        assert listed[2].pinned and not listed[1].pinned
        assert listed[0].role == Role(turns[0]["role"])
        assert sum(t.tokens for t in listed) == gk.conversation("life-20").total_tokens


def test_conversations_are_listed_erased_exported_and_imported_byte_exactly(service):
    with Gatekeeper(service.url, api_key=service.key) as gk:
        for n in (21, 22):
            gk.append(f"life-{n}", tau_turns(n))
        gk.append("other-23", tau_turns(23)[:2])
        page = gk.conversations(prefix="life-", limit=1)
        assert [c.conversation for c in page.conversations] == ["life-21"]
        rest = gk.conversations(prefix="life-", cursor=page.next_cursor)
        assert [c.conversation for c in rest.conversations] == ["life-22"]
        assert rest.conversations[0].turns == len(tau_turns(22))

        exported = gk.export("life-21")
        header = json.loads(exported.splitlines()[0])
        assert header["turns"] == len(tau_turns(21)), header
        assert gk.erase("life-21") is None
        with pytest.raises(ProblemError) as gone:
            gk.conversation("life-21")
        assert gone.value.status == 404
        with pytest.raises(ProblemError) as again:
            gk.erase("life-21")
        assert again.value.status == 404

        restored = gk.import_("life-21", exported)
        assert (restored.conversation, restored.turns, restored.checkpoints) == (
            "life-21",
            len(tau_turns(21)),
            0,
        )
        assert gk.export("life-21") == exported
        with pytest.raises(ProblemError) as taken:
            gk.import_("life-22", exported)
        assert taken.value.status == 409
        with pytest.raises(ProblemError) as broken:
            gk.import_("life-new", b'{"type":"turn"}\n')
        assert broken.value.status == 422 and "line 1" in broken.value.detail


async def test_the_async_client_lists_erases_exports_and_imports_too(service):
    async with AsyncGatekeeper(service.url, api_key=service.key) as gk:
        await gk.append("life-24", tau_turns(24))
        page = await gk.turns("life-24")
        assert [t.id for t in page.turns] == list(range(len(tau_turns(24))))
        listed = await gk.conversations()
        assert [c.conversation for c in listed.conversations] == ["life-24"]
        exported = await gk.export("life-24")
        await gk.erase("life-24")
        assert (await gk.conversations()).conversations == []
        assert (await gk.import_("life-24", exported)).turns == len(tau_turns(24))
        assert await gk.export("life-24") == exported
