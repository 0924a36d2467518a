"""What this process knows of a conversation's raw log, and appending the agent's messages to it,
each once."""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from .._client import Gatekeeper
from .._generated.models.checkpoint_ref import CheckpointRef
from ..errors import ProblemError
from ._messages import message_role, message_text

logger = logging.getLogger(__package__)  # the package's logger: the name users filter on

_LABEL_MAX = 256  # the service's limit on external ids


def valid_label(value: str | None) -> bool:
    return bool(value) and len(value) <= _LABEL_MAX and value.isprintable()  # type: ignore[union-attr]


def ensure_ids(messages: Sequence[BaseMessage]) -> None:
    """Messages in a LangGraph state have ids (``add_messages`` gives them); others get one here,
    as LangChain's summarization middleware does, since the id is what marks a message logged."""
    for m in messages:
        if m.id is None:
            m.id = str(uuid.uuid4())


@dataclass
class Log:
    """What this process knows of one conversation's raw log."""

    synced: bool = False
    next_id: int = 0
    checkpoint_id: int | None = None
    # message id → turn id; -1 for a message known to precede the log.
    turns: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def by_turn(self, messages: Sequence[BaseMessage]) -> dict[int, BaseMessage]:
        """The logged messages by turn id."""
        return {t: m for m in messages if (t := self.turns.get(str(m.id), -1)) >= 0}

    def append_new(
        self,
        client: Gatekeeper,
        conversation: str,
        messages: Sequence[BaseMessage],
        pin: Callable[[BaseMessage], bool] | None,
    ) -> None:
        """Appends the messages not logged yet (``pin`` says which to pin)."""
        if not self.synced:
            self._sync(client, conversation, messages)
            self.synced = True
        fresh = [m for m in messages if m.id not in self.turns]
        if not fresh:
            return
        turns = []
        for i, m in enumerate(fresh):
            turn: dict[str, Any] = {
                "id": self.next_id + i,
                "role": message_role(m),
                "content": message_text(m),
            }
            if valid_label(m.id):
                turn["external_id"] = m.id
            if pin is not None and pin(m):
                turn["pinned"] = True
            turns.append(turn)
        # The same messages give the same key and the same body: a retry after a lost answer
        # gets that answer back instead of appending twice.
        digest = hashlib.sha256("\0".join([conversation, *(str(m.id) for m in fresh)]).encode())
        answer = client.append(
            conversation, turns, idempotency_key=f"langchain-append-{digest.hexdigest()}"
        )
        for m, t in zip(fresh, answer.turns, strict=True):
            self.turns[str(m.id)] = t.id
        self.next_id = answer.next_id

    def _sync(self, client: Gatekeeper, conversation: str, messages: Sequence[BaseMessage]) -> None:
        """On first sight of a conversation, learns where its log ends. When the last logged turn
        is one of the agent's messages (its external id is the message id), that message and the
        ones before it are logged already: a restarted process does not append them again."""
        try:
            info = client.conversation(conversation)
        except ProblemError as e:
            if e.status == 404:
                return
            raise
        self.next_id = info.next_id
        if isinstance(info.latest_checkpoint, CheckpointRef):
            self.checkpoint_id = info.latest_checkpoint.checkpoint_id
        if info.next_id == 0:
            return
        last = client.turn(conversation, info.next_id - 1).external_id
        index = {m.id: i for i, m in enumerate(messages)}
        k = index.get(last) if isinstance(last, str) else None
        if k is None:
            logger.info(
                "gatekeeper %s: its log holds %d turns the agent state does not; "
                "appending the state's messages after them",
                conversation,
                info.next_id,
            )
            return
        for i in range(k + 1):
            self.turns[str(messages[i].id)] = max(info.next_id - 1 - (k - i), -1)
