"""LangChain messages and gatekeeper turns: the role and text a message is logged as, and the
messages a working context is sent to a chat model as, tool calls kept paired with their results."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .._generated.models.context_item_type_0 import ContextItemType0
from .._generated.models.context_item_type_1 import ContextItemType1
from .._generated.models.context_item_type_2 import ContextItemType2
from .._generated.models.context_response import ContextResponse

_ROLES = {
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
    "system": "system",
}


def message_role(message: BaseMessage) -> str:
    """The gatekeeper role a LangChain message is logged as: human → user, ai → assistant,
    tool (and legacy function) → tool, system → system; a ``ChatMessage`` keeps its role when it
    is one of those four, else it counts as the user's."""
    if message.type == "chat":
        role = str(getattr(message, "role", ""))
        return role if role in ("user", "assistant", "tool", "system") else "user"
    try:
        return _ROLES[message.type]
    except KeyError:
        raise ValueError(f"a {message.type!r} message has no place in the raw log") from None


def message_text(message: BaseMessage) -> str:
    """The text the raw log keeps for a message: its text and, for an AI message, one
    ``name(json_args)`` line per tool call after it, as ``gatekeeper append`` writes tau-bench tool
    calls, so that a tool-call-only turn still has words to search and anchors to check.

    Tool call ids are left out: they are provider noise, and as tokens with digits they would
    become anchors a summary must repeat. Arguments are JSON without ASCII escapes, so that a
    search for ``Zürich`` finds them."""
    text = message.content if isinstance(message.content, str) else message.text
    calls = getattr(message, "tool_calls", None) or []
    lines = [
        f"{c['name']}({json.dumps(c.get('args', {}), ensure_ascii=False, separators=(',', ':'))})"
        for c in calls
    ]
    if not lines:
        return text
    return "\n".join([text, *lines]) if text else "\n".join(lines)


def context_messages(
    context: ContextResponse, originals: Mapping[int, BaseMessage] | None = None
) -> list[BaseMessage]:
    """The messages a chat model gets for a working context.

    A summary becomes one ``HumanMessage`` (as LangChain's own summary message: providers accept a
    user message anywhere, a system message often only first). A verbatim turn becomes the agent's
    own message when ``originals`` (turn id → message) holds it with the same text, else a message
    of its role. A stub becomes a user-side note that the turn exists and how to recall it.

    Tool results are only ``ToolMessage``s right after the ``AIMessage`` whose calls they answer,
    all of them: providers refuse a tool result without its call and a call without its results.
    A pair a summary or a stub broke apart is sent as plain text (the call as the assistant's text,
    the result as a user-side note)."""
    originals = originals or {}
    rendered: list[tuple[int | None, BaseMessage]] = []
    for item in context.items:
        if isinstance(item, ContextItemType0):
            rendered.append((None, _summary_message(item)))
        elif isinstance(item, ContextItemType1):
            original = originals.get(item.id)
            same = (
                original is not None
                and message_role(original) == str(item.role)
                and message_text(original) == item.content
            )
            message = original if same else _plain(item.id, str(item.role), item.content)
            rendered.append((item.id, message))  # type: ignore[arg-type]
        elif isinstance(item, ContextItemType2):
            rendered.append((item.id, _stub_message(item)))
    return _pair_tool_calls(rendered)


def _ranges(covers: Sequence[Sequence[int]]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in covers)


def _summary_message(item: ContextItemType0) -> HumanMessage:
    return HumanMessage(
        content=f"Here is a summary of turns {_ranges(item.covers)} of the conversation to date "
        f"(recall_turn(turn) returns any of them word for word):\n\n{item.text}",
        additional_kwargs={"lc_source": "summarization"},
    )


def _stub_message(item: ContextItemType2) -> HumanMessage:
    anchors = ", ".join(item.anchors) or "none"
    return HumanMessage(
        content=f"[Turn {item.id} ({item.role}, {item.tokens} tokens) is left out of this context. "
        f"It begins: {item.preview!r}. Anchors: {anchors}. "
        f"recall_turn(turn={item.id}) returns it.]"
    )


def _plain(turn: int | None, role: str, content: str) -> BaseMessage:
    if role == "assistant":
        return AIMessage(content=content)
    if role == "system":
        return SystemMessage(content=content)
    if role == "tool":
        return HumanMessage(content=f"[Turn {turn}: tool result]\n{content}")
    return HumanMessage(content=content)


def _pair_tool_calls(rendered: list[tuple[int | None, BaseMessage]]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    i = 0
    while i < len(rendered):
        turn, message = rendered[i]
        if isinstance(message, AIMessage) and message.tool_calls:
            j = i + 1
            while j < len(rendered) and isinstance(rendered[j][1], ToolMessage):
                j += 1
            results = rendered[i + 1 : j]
            wanted = {c.get("id") for c in message.tool_calls}
            answered = {r.tool_call_id for _, r in results}  # type: ignore[attr-defined]
            if None not in wanted and wanted == answered:
                out += [message, *(r for _, r in results)]
            else:
                out.append(AIMessage(content=message_text(message)))
                out += [_plain(t, "tool", message_text(r)) for t, r in results]
            i = j
            continue
        out.append(
            _plain(turn, "tool", message_text(message))
            if isinstance(message, ToolMessage)
            else message
        )
        i += 1
    return out
