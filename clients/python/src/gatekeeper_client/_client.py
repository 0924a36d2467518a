"""``Gatekeeper`` (blocking) and ``AsyncGatekeeper`` (awaitable): the same methods, one per
endpoint. Both carry each conversation's commit position from its writes to its reads
(read-your-writes when the service reads from replicas), and retry ``503``/``429`` answers with
exponential backoff, honouring ``Retry-After``; every POST carries one ``Idempotency-Key`` (the
caller's, or a fresh one) that all its retries reuse, so a retried append or proposal is applied
once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import httpx

from . import _requests as r
from ._generated.models.append_turns_response import AppendTurnsResponse
from ._generated.models.checkpoint_list_response import CheckpointListResponse
from ._generated.models.checkpoint_response import CheckpointResponse
from ._generated.models.compaction_plan_response import CompactionPlanResponse
from ._generated.models.context_response import ContextResponse
from ._generated.models.conversation_list_response import ConversationListResponse
from ._generated.models.conversation_response import ConversationResponse
from ._generated.models.import_response import ImportResponse
from ._generated.models.mode import Mode
from ._generated.models.reconstruct_response import ReconstructResponse
from ._generated.models.search_response import SearchResponse
from ._generated.models.turn_list_response import TurnListResponse
from ._generated.models.turn_response import TurnResponse
from ._generated.models.verdict_response import VerdictResponse


class _Settings:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout: float,
        retries: int,
        backoff: float,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"{base_url!r} is not a base URL (expected e.g. http://127.0.0.1:8080)"
            )
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.positions = r.Positions()


class Gatekeeper:
    """A blocking client. ``Gatekeeper("http://127.0.0.1:8080", api_key=...)``; use it as a context
    manager or call ``close()``."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.2,
        http: httpx.Client | None = None,
    ):
        self._s = _Settings(base_url, api_key, timeout, retries, backoff)
        self._http = http or httpx.Client(base_url=self._s.base_url, timeout=timeout)

    def __enter__(self) -> Gatekeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: r.Call) -> Any:
        kwargs = r.request_kwargs(call, self._s.api_key, self._s.positions)
        attempt = 0
        while True:
            response = self._http.request(**kwargs)
            self._s.positions.saw(call, response)
            if not r.should_retry(response, attempt, self._s.retries):
                return r.result(call, response)
            time.sleep(r.retry_pause(response, attempt, self._s.backoff))
            attempt += 1

    def append(
        self, conversation: str, turns: Iterable[r.TurnLike], *, idempotency_key: str | None = None
    ) -> AppendTurnsResponse:
        """Appends turns (dicts or ``AppendTurn``) to the raw log; ids assigned when omitted."""
        return self._send(r.append_call(conversation, turns, idempotency_key))

    def plan(
        self, conversation: str, summary_budget: int, from_: int | None = None
    ) -> CompactionPlanResponse:
        """The range to summarize next under ``summary_budget``, its anchors, and the advice."""
        return self._send(r.plan_call(conversation, summary_budget, from_))

    def propose(
        self,
        conversation: str,
        from_: int,
        to: int,
        summary: str,
        summary_budget: int,
        *,
        finish_reason: str | None = None,
        consumed: list[list[int]] | None = None,
        end_marker: str | None = None,
        mode: str | Mode | None = None,
        dry_run: bool = False,
        expected_checkpoint: int | None = None,
        idempotency_key: str | None = None,
    ) -> VerdictResponse:
        """Proposes a compaction; raises ``RejectedError`` (with the verdict) when nothing is
        covered."""
        return self._send(
            r.propose_call(
                conversation, from_, to, summary, summary_budget,
                finish_reason=finish_reason, consumed=consumed, end_marker=end_marker, mode=mode,
                dry_run=dry_run, expected_checkpoint=expected_checkpoint, key=idempotency_key,
            )
        )  # fmt: skip

    def reconstruct(self, conversation: str, turn: int) -> ReconstructResponse:
        return self._send(r.reconstruct_call(conversation, turn))

    def context(self, conversation: str, max_tokens: int | None = None) -> ContextResponse:
        return self._send(r.context_call(conversation, max_tokens))

    def conversation(self, conversation: str) -> ConversationResponse:
        return self._send(r.conversation_call(conversation))

    def turn(self, conversation: str, turn: int) -> TurnResponse:
        return self._send(r.turn_call(conversation, turn))

    def set_pinned(self, conversation: str, turn: int, pinned: bool) -> TurnResponse:
        return self._send(r.set_pinned_call(conversation, turn, pinned))

    def checkpoints(
        self, conversation: str, *, limit: int | None = None, cursor: int | None = None
    ) -> CheckpointListResponse:
        """One page of checkpoints, newest first; pass ``next_cursor`` back for the next."""
        return self._send(r.checkpoints_call(conversation, limit, cursor))

    def checkpoint(self, conversation: str, checkpoint_id: int) -> CheckpointResponse:
        return self._send(r.checkpoint_call(conversation, checkpoint_id))

    def turns(
        self, conversation: str, *, from_: int | None = None, limit: int | None = None
    ) -> TurnListResponse:
        """One page of the log's turns without content; pass ``next_from`` back for the next."""
        return self._send(r.turns_call(conversation, from_, limit))

    def conversations(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> ConversationListResponse:
        """One page of the tenant's conversations by name; pass ``next_cursor`` back."""
        return self._send(r.conversations_call(prefix, limit, cursor))

    def erase(self, conversation: str) -> None:
        """Erases the conversation and everything of it, at once."""
        self._send(r.erase_call(conversation))

    def export(self, conversation: str) -> bytes:
        """The conversation as NDJSON, which ``import_`` restores exactly."""
        return self._send(r.export_call(conversation))

    def import_(self, conversation: str, ndjson: bytes) -> ImportResponse:
        """Restores an export into a conversation that holds nothing."""
        return self._send(r.import_call(conversation, ndjson))

    def search(
        self,
        query: str,
        conversation: str | None = None,
        *,
        limit: int | None = None,
        conversation_prefix: str | None = None,
    ) -> SearchResponse:
        """Searches one conversation's raw log, or (without ``conversation``) the whole tenant's."""
        return self._send(r.search_call(query, conversation, limit, conversation_prefix))

    def ready(self) -> bool:
        try:
            self._send(r.ready_call())
        except Exception:  # noqa: BLE001 - any failure means "not ready"
            return False
        return True


class AsyncGatekeeper:
    """``Gatekeeper``'s methods, awaitable. ``async with AsyncGatekeeper(url) as gk: ...``"""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.2,
        http: httpx.AsyncClient | None = None,
    ):
        self._s = _Settings(base_url, api_key, timeout, retries, backoff)
        self._http = http or httpx.AsyncClient(base_url=self._s.base_url, timeout=timeout)

    async def __aenter__(self) -> AsyncGatekeeper:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: r.Call) -> Any:
        kwargs = r.request_kwargs(call, self._s.api_key, self._s.positions)
        attempt = 0
        while True:
            response = await self._http.request(**kwargs)
            self._s.positions.saw(call, response)
            if not r.should_retry(response, attempt, self._s.retries):
                return r.result(call, response)
            await asyncio.sleep(r.retry_pause(response, attempt, self._s.backoff))
            attempt += 1

    async def append(
        self, conversation: str, turns: Iterable[r.TurnLike], *, idempotency_key: str | None = None
    ) -> AppendTurnsResponse:
        return await self._send(r.append_call(conversation, turns, idempotency_key))

    async def plan(
        self, conversation: str, summary_budget: int, from_: int | None = None
    ) -> CompactionPlanResponse:
        return await self._send(r.plan_call(conversation, summary_budget, from_))

    async def propose(
        self,
        conversation: str,
        from_: int,
        to: int,
        summary: str,
        summary_budget: int,
        *,
        finish_reason: str | None = None,
        consumed: list[list[int]] | None = None,
        end_marker: str | None = None,
        mode: str | Mode | None = None,
        dry_run: bool = False,
        expected_checkpoint: int | None = None,
        idempotency_key: str | None = None,
    ) -> VerdictResponse:
        return await self._send(
            r.propose_call(
                conversation, from_, to, summary, summary_budget,
                finish_reason=finish_reason, consumed=consumed, end_marker=end_marker, mode=mode,
                dry_run=dry_run, expected_checkpoint=expected_checkpoint, key=idempotency_key,
            )
        )  # fmt: skip

    async def reconstruct(self, conversation: str, turn: int) -> ReconstructResponse:
        return await self._send(r.reconstruct_call(conversation, turn))

    async def context(self, conversation: str, max_tokens: int | None = None) -> ContextResponse:
        return await self._send(r.context_call(conversation, max_tokens))

    async def conversation(self, conversation: str) -> ConversationResponse:
        return await self._send(r.conversation_call(conversation))

    async def turn(self, conversation: str, turn: int) -> TurnResponse:
        return await self._send(r.turn_call(conversation, turn))

    async def set_pinned(self, conversation: str, turn: int, pinned: bool) -> TurnResponse:
        return await self._send(r.set_pinned_call(conversation, turn, pinned))

    async def checkpoints(
        self, conversation: str, *, limit: int | None = None, cursor: int | None = None
    ) -> CheckpointListResponse:
        return await self._send(r.checkpoints_call(conversation, limit, cursor))

    async def checkpoint(self, conversation: str, checkpoint_id: int) -> CheckpointResponse:
        return await self._send(r.checkpoint_call(conversation, checkpoint_id))

    async def turns(
        self, conversation: str, *, from_: int | None = None, limit: int | None = None
    ) -> TurnListResponse:
        """One page of the log's turns without content; pass ``next_from`` back for the next."""
        return await self._send(r.turns_call(conversation, from_, limit))

    async def conversations(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> ConversationListResponse:
        """One page of the tenant's conversations by name; pass ``next_cursor`` back."""
        return await self._send(r.conversations_call(prefix, limit, cursor))

    async def erase(self, conversation: str) -> None:
        """Erases the conversation and everything of it, at once."""
        await self._send(r.erase_call(conversation))

    async def export(self, conversation: str) -> bytes:
        """The conversation as NDJSON, which ``import_`` restores exactly."""
        return await self._send(r.export_call(conversation))

    async def import_(self, conversation: str, ndjson: bytes) -> ImportResponse:
        """Restores an export into a conversation that holds nothing."""
        return await self._send(r.import_call(conversation, ndjson))

    async def search(
        self,
        query: str,
        conversation: str | None = None,
        *,
        limit: int | None = None,
        conversation_prefix: str | None = None,
    ) -> SearchResponse:
        return await self._send(r.search_call(query, conversation, limit, conversation_prefix))

    async def ready(self) -> bool:
        try:
            await self._send(r.ready_call())
        except Exception:  # noqa: BLE001 - any failure means "not ready"
            return False
        return True
