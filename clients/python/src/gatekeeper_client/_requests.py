"""Each call once, as data: the generated request (path, query, body) and the generated parser.

``Gatekeeper`` and ``AsyncGatekeeper`` only differ in how they send; what they send, and how an
answer is read, is decided here and in ``_generated`` (regenerated from openapi.yaml, never edited).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any
from urllib.parse import quote

import httpx

from ._generated.api.compactions import list_, one, propose
from ._generated.api.conversations import (
    erase_conversation,
    export_conversation,
    list_conversations,
)
from ._generated.api.operations import readyz
from ._generated.api.reads import (
    compaction_plan,
    context,
    reconstruct,
    search_conversation,
    search_tenant,
)
from ._generated.api.turns import append, conversation, list_turns, set_pinned, turn
from ._generated.models.append_turn import AppendTurn
from ._generated.models.append_turns_request import AppendTurnsRequest
from ._generated.models.compaction_request_body import CompactionRequestBody
from ._generated.models.import_response import ImportResponse
from ._generated.models.mode import Mode
from ._generated.models.turn_patch import TurnPatch
from ._generated.types import UNSET
from .errors import error_for

#: The longest single wait between retries, whatever ``Retry-After`` says.
MAX_PAUSE = 30.0

TurnLike = AppendTurn | Mapping[str, Any]


@dataclass(frozen=True)
class Call:
    """One request: httpx keyword arguments, and the generated module that reads its answer."""

    kwargs: dict[str, Any]
    endpoint: ModuleType | SimpleNamespace
    # POSTs carry an Idempotency-Key (the caller's, or a fresh one) that every retry reuses.
    idempotency_key: str | None = None
    # The conversation it reads or writes; None for a tenant-wide read.
    conversation: str | None = None
    # What a success carries: "json" (parsed by the endpoint), "nothing" (204) or "bytes".
    answer: str = "json"


def _lsn(position: str) -> int:
    high, _, low = position.partition("/")
    return int(high, 16) << 32 | int(low, 16)


class Positions:
    """Read-your-writes with read replicas: the newest ``Gatekeeper-Position`` each conversation's
    writes answered, sent back as ``Gatekeeper-Min-Position`` on its reads (a tenant-wide read
    sends the newest of all), so a read never sees a state older than a write this client saw."""

    def __init__(self) -> None:
        self._by_conversation: dict[str, tuple[int, str]] = {}
        self._newest: tuple[int, str] | None = None

    def header_for(self, call: Call) -> dict[str, str]:
        if call.kwargs["method"] != "get":
            return {}
        seen = (
            self._newest
            if call.conversation is None
            else self._by_conversation.get(call.conversation)
        )
        return {"Gatekeeper-Min-Position": seen[1]} if seen else {}

    def saw(self, call: Call, response: httpx.Response) -> None:
        position = response.headers.get("gatekeeper-position")
        if not position or call.conversation is None:
            return
        try:
            seen = (_lsn(position), position)
        except ValueError:
            return
        if seen > self._by_conversation.get(call.conversation, (-1, "")):
            self._by_conversation[call.conversation] = seen
        if self._newest is None or seen > self._newest:
            self._newest = seen


def _or_unset(value: Any) -> Any:
    return UNSET if value is None else value


def _post(endpoint: ModuleType, key: str | None, **kwargs: Any) -> Call:
    key = key or str(uuid.uuid4())
    kw = endpoint._get_kwargs(**kwargs, idempotency_key=key)
    return Call(kw, endpoint, key, kwargs.get("conversation"))


def _plain(endpoint: ModuleType, answer: str = "json", **kwargs: Any) -> Call:
    conv = kwargs.get("conversation")
    return Call(endpoint._get_kwargs(**kwargs), endpoint, None, conv, answer)


def _turn(t: TurnLike) -> AppendTurn:
    return t if isinstance(t, AppendTurn) else AppendTurn.from_dict(dict(t))


def append_call(conv: str, turns: Iterable[TurnLike], key: str | None) -> Call:
    body = AppendTurnsRequest(turns=[_turn(t) for t in turns])
    return _post(append, key, conversation=conv, body=body)


def plan_call(conv: str, summary_budget: int, from_: int | None) -> Call:
    return _plain(
        compaction_plan, conversation=conv, summary_budget=summary_budget, from_=_or_unset(from_)
    )


def propose_call(
    conv: str,
    from_: int,
    to: int,
    summary: str,
    summary_budget: int,
    *,
    finish_reason: str | None,
    consumed: list[list[int]] | None,
    end_marker: str | None,
    mode: str | Mode | None,
    dry_run: bool,
    expected_checkpoint: int | None,
    key: str | None,
) -> Call:
    body = CompactionRequestBody(
        from_=from_,
        to=to,
        summary=summary,
        summary_budget=summary_budget,
        finish_reason=_or_unset(finish_reason),
        consumed=_or_unset(consumed),
        end_marker=_or_unset(end_marker),
        mode=UNSET if mode is None else Mode(mode),
        dry_run=dry_run,
        expected_checkpoint=_or_unset(expected_checkpoint),
    )
    return _post(propose, key, conversation=conv, body=body)


def reconstruct_call(conv: str, turn_id: int) -> Call:
    return _plain(reconstruct, conversation=conv, turn=turn_id)


def context_call(conv: str, max_tokens: int | None) -> Call:
    return _plain(context, conversation=conv, max_tokens=_or_unset(max_tokens))


def conversation_call(conv: str) -> Call:
    return _plain(conversation, conversation=conv)


def turn_call(conv: str, turn_id: int) -> Call:
    return _plain(turn, conversation=conv, id=turn_id)


def set_pinned_call(conv: str, turn_id: int, pinned: bool) -> Call:
    return _plain(set_pinned, conversation=conv, id=turn_id, body=TurnPatch(pinned=pinned))


def checkpoints_call(conv: str, limit: int | None, cursor: int | None) -> Call:
    return _plain(list_, conversation=conv, limit=_or_unset(limit), cursor=_or_unset(cursor))


def turns_call(conv: str, from_: int | None, limit: int | None) -> Call:
    return _plain(list_turns, conversation=conv, from_=_or_unset(from_), limit=_or_unset(limit))


def conversations_call(prefix: str | None, limit: int | None, cursor: str | None) -> Call:
    return _plain(
        list_conversations,
        prefix=_or_unset(prefix),
        limit=_or_unset(limit),
        cursor=_or_unset(cursor),
    )


def erase_call(conv: str) -> Call:
    return _plain(erase_conversation, answer="nothing", conversation=conv)


def export_call(conv: str) -> Call:
    return _plain(export_conversation, answer="bytes", conversation=conv)


def _import_response(*, client: Any, response: httpx.Response) -> ImportResponse | None:
    return ImportResponse.from_dict(response.json()) if response.status_code == 201 else None


def import_call(conv: str, ndjson: bytes) -> Call:
    # Not generated: the generator does not take NDJSON bodies.
    kwargs = {
        "method": "post",
        "url": f"/v1/conversations/{quote(conv, safe='')}/import",
        "content": ndjson,
        "headers": {"Content-Type": "application/x-ndjson"},
    }
    return Call(kwargs, SimpleNamespace(_parse_response=_import_response), None, conv)


def checkpoint_call(conv: str, checkpoint_id: int) -> Call:
    return _plain(one, conversation=conv, checkpoint_id=checkpoint_id)


def search_call(
    query: str, conv: str | None, limit: int | None, conversation_prefix: str | None
) -> Call:
    if conv is not None:
        if conversation_prefix is not None:
            raise ValueError("conversation_prefix applies to tenant-wide searches only")
        return _plain(search_conversation, conversation=conv, q=query, limit=_or_unset(limit))
    return _plain(
        search_tenant,
        q=query,
        limit=_or_unset(limit),
        conversation_prefix=_or_unset(conversation_prefix),
    )


def ready_call() -> Call:
    return _plain(readyz)


def request_kwargs(call: Call, api_key: str | None, positions: Positions) -> dict[str, Any]:
    kwargs = dict(call.kwargs)
    headers = dict(kwargs.pop("headers", {}))
    headers.update(positions.header_for(call))
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    kwargs["headers"] = headers
    return kwargs


def retry_pause(response: httpx.Response, attempt: int, backoff: float) -> float:
    """How long to wait before retrying a 503/429: exponential backoff with jitter, at least the
    answer's ``Retry-After``, at most ``MAX_PAUSE``."""
    wait = backoff * (2**attempt) * (1 + random.random() / 4)
    try:
        wait = max(wait, float(response.headers.get("retry-after", "")))
    except ValueError:
        pass
    return min(wait, MAX_PAUSE)


def should_retry(response: httpx.Response, attempt: int, retries: int) -> bool:
    return response.status_code in (429, 503) and attempt < retries


class _Lenient:
    # The generated parser consults this only for statuses the contract does not list.
    raise_on_unexpected_status = False


def result(call: Call, response: httpx.Response) -> Any:
    """The typed body of a success, or the error a failure stands for."""
    text = response.text
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success and call.answer == "nothing":
        return None
    if response.is_success and call.answer == "bytes":
        return response.content
    if response.is_success and body is not None:
        parsed = call.endpoint._parse_response(client=_Lenient(), response=response)
        if parsed is not None:
            return parsed
    raise error_for(response.status_code, body, text)
