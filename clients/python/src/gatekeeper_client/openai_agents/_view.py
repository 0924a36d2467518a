"""The working context as SDK items: summaries and stubs as notes, calls and outputs kept whole."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._generated.models.context_item_type_0 import ContextItemType0
from .._generated.models.context_item_type_1 import ContextItemType1
from .._generated.models.context_item_type_2 import ContextItemType2
from ._encoding import CALL_OUTPUT, OUTPUT_CALL, Entry, dumps

ContextItem = ContextItemType0 | ContextItemType1 | ContextItemType2


@dataclass
class Rendered:
    item: dict[str, Any]
    entry: Entry | None = None  # the turn it stands for, when it is a verbatim item
    tokens: int = 0


def verbatim_ids(items: Sequence[ContextItem]) -> list[int]:
    """The turns the context has verbatim: the ones whose stored items are needed."""
    return [it.id for it in items if isinstance(it, ContextItemType1)]


def _ranges(covers: list[list[int]]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in covers)


def render(
    items: Sequence[ContextItem], entries: dict[int, Entry], note_role: str
) -> tuple[list[Rendered], set[int]]:
    """The context items as SDK items (before pairs are checked), and the withdrawn turns.
    ``entries`` holds every verbatim turn; withdrawn turns and markers are left out."""
    withdrawn = {e.withdraws for e in entries.values() if e.withdraws is not None}
    rendered: list[Rendered] = []
    for it in items:
        if isinstance(it, ContextItemType0):
            head = f"Summary of earlier turns ({_ranges(it.covers)}) of this conversation:"
            text = f"{head}\n{it.text}"
            rendered.append(Rendered({"role": note_role, "content": text}, None, it.tokens))
        elif isinstance(it, ContextItemType1):
            entry = entries[it.id]
            if entry.item is not None and it.id not in withdrawn:
                rendered.append(Rendered(copy.deepcopy(entry.item), entry, it.tokens))
        elif isinstance(it, ContextItemType2) and it.id not in withdrawn:
            anchors = f" Its anchors: {', '.join(it.anchors)}." if it.anchors else ""
            text = (
                f"[Turn {it.id} ({it.role.value}, {it.tokens} tokens) is left out to fit the "
                f"context. It begins: {it.preview!r}.{anchors} Recall it byte-exact with "
                f"GET {it.recall} (MCP tool recall_turn).]"
            )
            rendered.append(Rendered({"role": note_role, "content": text}, None, it.stub_tokens))
    return rendered, withdrawn


def unsplit(rendered: list[Rendered], note_role: str) -> list[dict[str, Any]]:
    """Never a call without its output or an output without its call: the Responses API refuses
    an output whose call is missing, and a call whose output was summarized or stubbed reads
    better as text than it would be dropped. Either half alone becomes a plain message, except
    calls at the very end (a pending batch whose outputs are not added yet; should a summary stand
    for such a call's output instead, the SDK drops the call as an orphan itself). A reasoning item
    just before a call rendered as text goes too: the API refuses reasoning without its item."""
    kinds = [r.item.get("type") for r in rendered]
    call_at: dict[tuple[str, str], int] = {}
    output_at: dict[tuple[str, str], int] = {}
    for i, r in enumerate(rendered):
        call_id = r.item.get("call_id")
        if not isinstance(call_id, str):
            continue
        if kinds[i] in CALL_OUTPUT:
            call_at.setdefault((CALL_OUTPUT[kinds[i]], call_id), i)
        elif kinds[i] in OUTPUT_CALL:
            output_at.setdefault((kinds[i], call_id), i)
    plain: set[int] = set()
    for key, i in call_at.items():
        j = output_at.get(key)
        if j is not None and j > i:
            continue
        after = kinds[i + 1 :]
        pending = all(k in CALL_OUTPUT or k == "reasoning" for k in after)
        if not pending:
            plain.add(i)
    for key, j in output_at.items():
        i = call_at.get(key)
        if i is None or i > j or i in plain:
            plain.add(j)
    dropped: set[int] = set()
    for i in plain:
        if kinds[i] in CALL_OUTPUT:
            k = i - 1
            while k >= 0 and kinds[k] == "reasoning":
                dropped.add(k)
                k -= 1
    out: list[dict[str, Any]] = []
    for i, r in enumerate(rendered):
        if i in dropped:
            continue
        if i not in plain:
            out.append(r.item)
            continue
        text = r.entry.content if r.entry is not None else dumps(r.item)
        call_id = r.item.get("call_id")
        if kinds[i] in CALL_OUTPUT:
            out.append({"role": "assistant", "content": f"[tool call {call_id}] {text}"})
        else:
            out.append({"role": note_role, "content": f"[result of tool call {call_id}] {text}"})
    return out
