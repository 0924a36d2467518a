"""``GatekeeperSession``: the Agents SDK session protocol over the gatekeeper's raw log."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal

from agents.items import TResponseInputItem
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from .._client import AsyncGatekeeper
from .._generated.models.compaction_plan_response import CompactionPlanResponse
from .._generated.models.context_response import ContextResponse
from .._generated.models.verdict_response import VerdictResponse
from .._generated.types import Unset
from ..errors import ProblemError, RejectedError
from ._encoding import EXT_CLEARED, EXT_POP, Entry, decode_turn, dumps, encode_item
from ._view import Rendered, render, unsplit, verbatim_ids

# The package's name, not this module's: the logger is part of the package's interface.
logger = logging.getLogger("gatekeeper_client.openai_agents")

#: ``summarize(turns, must_keep, budget)``: ``turns`` are ``{"id", "role", "content"}`` dicts of
#: the planned range, ``must_keep`` the anchors the summary must hold for the gatekeeper to count
#: those turns covered, ``budget`` the summary's token budget. Sync or async.
Summarizer = Callable[[list[dict[str, Any]], list[str], int], "str | Awaitable[str]"]

MAX_CONVERSATION_ID = 128
#: Turns fetched at once when the cache misses (a fresh process reading an old session).
FETCH_CONCURRENCY = 8


class GatekeeperSession:
    """An Agents SDK ``Session`` kept in the gatekeeper (see the package docstring).

    ``session_id`` names the gatekeeper conversation (``<session_id>:gen<N>`` after
    ``clear_session``). ``max_tokens`` is the context budget ``get_items`` asks for (turns that do
    not fit come back as stubs); ``compact_at`` the context size (tokens, counted by the service)
    past which ``add_items`` compacts, default three quarters of ``max_tokens``; without a
    ``summarizer`` nothing is compacted. ``note_role`` is the role of the messages the session
    writes itself (summaries, stubs, a tool result whose call is gone).
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        client: AsyncGatekeeper,
        *,
        summarizer: Summarizer | None = None,
        max_tokens: int | None = None,
        summary_budget: int = 1024,
        compact_at: int | None = None,
        note_role: Literal["system", "developer", "user"] = "system",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ):
        if summary_budget <= 0:
            raise ValueError("summary_budget must be positive")
        self.session_id = session_id
        self.client = client
        self.summarizer = summarizer
        self.max_tokens = max_tokens
        self.summary_budget = summary_budget
        if compact_at is None and max_tokens is not None:
            compact_at = max_tokens * 3 // 4
        self.compact_at = compact_at
        self.note_role = note_role
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        #: The last proposal's verdict (a rejected one included), for logs and tests.
        self.last_verdict: VerdictResponse | None = None
        self._generation: int | None = None
        self._next_id = 0
        # Turns never change once appended, so this cache never goes stale.
        self._cache: dict[int, Entry] = {}
        self._lock = asyncio.Lock()
        self._compacting = asyncio.Lock()

    # -- where the session lives ------------------------------------------------------------------

    def _conversation_for(self, generation: int) -> str:
        conv = self.session_id if generation == 1 else f"{self.session_id}:gen{generation}"
        if len(conv) > MAX_CONVERSATION_ID:
            raise ValueError(f"{conv!r} is longer than {MAX_CONVERSATION_ID} characters")
        return conv

    async def _exists(self, conv: str) -> int | None:
        """The conversation's ``next_id``, or None when the service has no such conversation."""
        try:
            return (await self.client.conversation(conv)).next_id
        except ProblemError as e:
            if e.status == 404:
                return None
            raise

    async def _ready(self) -> str:
        """The current generation's conversation, found once: the newest that exists."""
        if self._generation is None:
            generation = 1
            while await self._exists(self._conversation_for(generation + 1)) is not None:
                generation += 1
            self._next_id = await self._exists(self._conversation_for(generation)) or 0
            self._generation = generation
        return self._conversation_for(self._generation)

    async def conversation(self) -> str:
        """The gatekeeper conversation holding the current generation of this session."""
        return await self._ready()

    # -- reading turns ----------------------------------------------------------------------------

    async def _entries(self, conv: str, ids: Iterable[int]) -> dict[int, Entry]:
        wanted = list(dict.fromkeys(ids))
        missing = [i for i in wanted if i not in self._cache]
        if missing:
            gate = asyncio.Semaphore(FETCH_CONCURRENCY)

            async def fetch(turn_id: int) -> None:
                async with gate:
                    t = await self.client.turn(conv, turn_id)
                external_id = None if isinstance(t.external_id, Unset) else t.external_id
                self._cache[turn_id] = decode_turn(t.id, t.role.value, t.content, external_id)

            await asyncio.gather(*(fetch(i) for i in missing))
        return {i: self._cache[i] for i in wanted}

    async def _context(self, conv: str, max_tokens: int | None) -> ContextResponse | None:
        try:
            return await self.client.context(conv, max_tokens=max_tokens)
        except ProblemError as e:
            if e.status == 404:
                return None
            raise

    async def _view(self, conv: str, max_tokens: int | None) -> tuple[list[Rendered], set[int]]:
        """The working context as SDK items (before pairs are checked), and the withdrawn turns."""
        ctx = await self._context(conv, max_tokens)
        if ctx is None:
            return [], set()
        if ctx.fits is False:
            logger.warning(
                "the working context of %s does not fit %s tokens (smallest: %s)",
                conv, max_tokens, ctx.smallest_max_tokens,
            )  # fmt: skip
        entries = await self._entries(conv, verbatim_ids(ctx.items))
        return render(ctx.items, entries, self.note_role)

    # -- the Session protocol ---------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The verified working context within ``max_tokens``, as SDK items, pairs whole.

        ``limit`` keeps the last N of those items, cut as they are (as ``SQLiteSession`` cuts):
        the SDK reconciles and rewinds its writes by comparing such a tail with what it added, so
        the tail must be exact, and it drops an output whose call the cut left out itself."""
        conv = await self._ready()
        rendered, _ = await self._view(conv, self.max_tokens)
        items = unsplit(rendered, self.note_role)
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit >= 0:
            items = items[max(0, len(items) - limit) :]
        return items  # type: ignore[return-value]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends each item as one turn, then compacts if the context outgrew ``compact_at``."""
        if not items:
            return
        turns = [encode_item(_as_dict(item)) for item in items]
        async with self._lock:
            conv = await self._ready()
            await self._append(conv, turns)
        await self._maybe_compact(conv)

    async def pop_item(self) -> TResponseInputItem | None:
        """Withdraws the newest live item (a pinned marker turn) and returns it."""
        async with self._lock:
            conv = await self._ready()
            self._next_id = await self._exists(conv) or 0
            withdrawn: set[int] = set()
            for turn_id in range(self._next_id - 1, -1, -1):
                entry = (await self._entries(conv, [turn_id]))[turn_id]
                if entry.withdraws is not None:
                    withdrawn.add(entry.withdraws)
                if entry.item is None or turn_id in withdrawn:
                    continue
                marker = {
                    "role": "system",
                    "content": f"(Turn {turn_id} was withdrawn; it is no longer in this session.)",
                    "external_id": f"{EXT_POP}{turn_id}",
                    "pinned": True,
                }
                await self._append(conv, [marker])
                return copy.deepcopy(entry.item)  # type: ignore[return-value]
            return None

    async def clear_session(self) -> None:
        """Starts the next generation (the log cannot be deleted); the old one stays readable."""
        async with self._lock:
            old = await self._ready()
            assert self._generation is not None
            generation = self._generation + 1
            conv = self._conversation_for(generation)
            marker = {
                "role": "system",
                "content": f"(The session was cleared; its earlier history is conversation {old}.)",
                "external_id": EXT_CLEARED,
                "pinned": True,
            }
            before = self._generation, self._next_id, self._cache
            self._generation, self._next_id, self._cache = generation, 0, {}
            try:
                await self._append(conv, [marker])
            except BaseException:
                self._generation, self._next_id, self._cache = before
                raise

    # -- writing ----------------------------------------------------------------------------------

    async def _append(self, conv: str, turns: list[dict[str, Any]]) -> None:
        """Appends at the next id; if another writer took those ids (409), once more after them."""
        for attempt in (0, 1):
            start = self._next_id
            body = [dict(t, id=start + i) for i, t in enumerate(turns)]
            digest = hashlib.sha256(dumps(body).encode()).hexdigest()[:32]
            key = f"oa1:{conv}:{start}:{digest}"
            try:
                answer = await self.client.append(conv, body, idempotency_key=key)
            except ProblemError as e:
                if e.status != 409 or attempt:
                    raise
                self._next_id = await self._exists(conv) or 0
                continue
            for t, appended in zip(body, answer.turns, strict=False):
                self._cache[appended.id] = decode_turn(
                    appended.id, t["role"], t["content"], t.get("external_id")
                )
            self._next_id = answer.next_id
            return

    # -- compaction -------------------------------------------------------------------------------

    async def _maybe_compact(self, conv: str) -> None:
        """One plan, summary and proposal when the context is past ``compact_at``. Compaction only
        saves tokens, so its failures are logged, never raised: the items are already stored."""
        if self.summarizer is None or self.compact_at is None or self._compacting.locked():
            return  # (one compaction at a time: a second would plan the same range)
        async with self._compacting:
            await self._compact_once(conv)

    async def _compact_once(self, conv: str) -> None:
        assert self.compact_at is not None
        try:
            rendered, withdrawn = await self._view(conv, None)
            live = sum(r.tokens for r in rendered)
            if live <= self.compact_at:
                return
            plan = await self.client.plan(conv, self.summary_budget)
            if plan.advice.value != "compact":
                logger.debug("not compacting %s: %s", conv, plan.advice_reason.value)
                return
            await self._compact(conv, plan, withdrawn)
        except RejectedError as e:
            self.last_verdict = e.verdict
            logger.warning("compaction of %s rejected: %s", conv, e.detail)
        except Exception:
            logger.exception("compaction of %s failed; the raw log is unaffected", conv)

    async def _compact(self, conv: str, plan: CompactionPlanResponse, withdrawn: set[int]) -> None:
        assert self.summarizer is not None
        planned = {t.id: t for t in plan.turns}
        entries = await self._entries(conv, sorted(planned))
        kept = [e for e in entries.values() if e.item is not None and e.id not in withdrawn]
        if not kept:
            return
        turns = [{"id": e.id, "role": e.role, "content": e.content} for e in kept]
        must_keep = list(dict.fromkeys(a for e in kept for a in planned[e.id].anchors))
        summary = await _call(self.summarizer, turns, must_keep, self.summary_budget)
        if not isinstance(plan.to, int):  # (only without `compact` advice)
            return
        self.last_verdict = await self.client.propose(
            conv, plan.from_, plan.to, summary, self.summary_budget
        )
        logger.info(
            "compacted %s: %s, covered %s",
            conv, self.last_verdict.outcome.value, self.last_verdict.covered,
        )  # fmt: skip


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    raise TypeError(f"not a session item: {type(item).__name__}")


async def _call(summarizer: Summarizer, *args: Any) -> str:
    """A coroutine function is awaited; a plain one runs in a thread, so a blocking LLM call does
    not stall the event loop (and what it returns is awaited if it is awaitable)."""
    if inspect.iscoroutinefunction(summarizer):
        result: Any = await summarizer(*args)
    else:
        result = await asyncio.to_thread(summarizer, *args)
        if inspect.isawaitable(result):
            result = await result
    if not isinstance(result, str):
        raise TypeError(f"the summarizer returned {type(result).__name__}, not str")
    return result
