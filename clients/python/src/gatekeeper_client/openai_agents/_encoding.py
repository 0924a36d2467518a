"""One SDK item <-> one turn (``role``, ``content``, ``external_id``); see the package docstring."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

EXT = "oa1:"
EXT_JSON = "oa1:json"
EXT_POP = "oa1:pop:"
EXT_CLEARED = "oa1:cleared"
#: Where a template's text goes back; a control character, so no real label collides with it.
SLOT = "\x00"
MAX_EXTERNAL_ID = 256

# Call items and the output item that answers each, matched by ``call_id``.
CALL_OUTPUT = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
OUTPUT_CALL = {output: call for call, output in CALL_OUTPUT.items()}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _role_of(item: dict[str, Any]) -> str:
    role = item.get("role")
    kind = item.get("type")
    if kind in (None, "message") and role in ("user", "assistant", "system"):
        return str(role)
    if role == "developer":
        return "system"
    if isinstance(kind, str) and kind.endswith("_output"):
        return "tool"
    return "assistant"


def _text_slot(item: dict[str, Any]) -> tuple[str | int, ...] | None:
    """The one field whose text is the item's readable content, if there is one."""
    kind = item.get("type")
    if kind in (None, "message") and "role" in item:
        content = item.get("content")
        if isinstance(content, str):
            return ("content",)
        if (
            isinstance(content, list)
            and len(content) == 1
            and isinstance(content[0], dict)
            and isinstance(content[0].get("text"), str)
        ):
            return ("content", 0, "text")
        return None
    if kind == "function_call" and isinstance(item.get("arguments"), str):
        return ("arguments",)
    if kind == "custom_tool_call" and isinstance(item.get("input"), str):
        return ("input",)
    if kind in OUTPUT_CALL and isinstance(item.get("output"), str):
        return ("output",)
    if kind == "reasoning":
        summary = item.get("summary")
        if (
            isinstance(summary, list)
            and len(summary) == 1
            and isinstance(summary[0], dict)
            and isinstance(summary[0].get("text"), str)
        ):
            return ("summary", 0, "text")
    return None


def _frame(template: dict[str, Any]) -> tuple[str, str]:
    """What surrounds the text in the content: a call reads ``name(arguments)``."""
    if template.get("type") in ("function_call", "custom_tool_call") and isinstance(
        template.get("name"), str
    ):
        return f"{template['name']}(", ")"
    return "", ""


def _find_slot(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(value, str):
        return [path] if value == SLOT else []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _find_slot(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _find_slot(v, (*path, i))]
    return []


def _set(value: Any, path: tuple[str | int, ...], text: str) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = text


def _from_template(content: str, template_json: str) -> dict[str, Any] | None:
    try:
        item = json.loads(template_json)
    except ValueError:
        return None
    if not isinstance(item, dict):
        return None
    slots = _find_slot(item)
    prefix, suffix = _frame(item)
    # (The frame is "" / "" or "name(" / ")", so prefix and suffix never overlap in content.)
    if len(slots) != 1 or not content.startswith(prefix) or not content.endswith(suffix):
        return None
    _set(item, slots[0], content[len(prefix) : len(content) - len(suffix)])
    return item


def encode_item(item: dict[str, Any]) -> dict[str, Any]:
    """The turn (``role``, ``content``, ``external_id``) that stores ``item`` exactly."""
    role = _role_of(item)
    exact = dumps(item)
    slot = _text_slot(item)
    if slot is not None:
        template = copy.deepcopy(item)
        text = template
        for key in slot:
            text = text[key]
        _set(template, slot, SLOT)
        # ASCII-escaped: no control characters (the service refuses them in labels).
        external_id = EXT + json.dumps(template, ensure_ascii=True, separators=(",", ":"))
        prefix, suffix = _frame(template)
        content = prefix + str(text) + suffix
        if len(external_id) <= MAX_EXTERNAL_ID:
            back = _from_template(content, external_id[len(EXT) :])
            if back is not None and dumps(back) == exact:
                return {"role": role, "content": content, "external_id": external_id}
    return {"role": role, "content": exact, "external_id": EXT_JSON}


@dataclass(frozen=True)
class Entry:
    """A decoded turn: the SDK item it stores, or a marker (``item`` is None)."""

    id: int
    role: str
    content: str
    item: dict[str, Any] | None
    #: For a ``pop_item`` marker: the turn it withdraws.
    withdraws: int | None = None


def decode_turn(turn_id: int, role: str, content: str, external_id: str | None) -> Entry:
    """The item a turn stores. A turn this module did not write (another client appended it)
    comes back as a plain message, a tool turn as a note."""
    if external_id == EXT_CLEARED:
        return Entry(turn_id, role, content, None)
    if external_id and external_id.startswith(EXT_POP):
        try:
            return Entry(turn_id, role, content, None, int(external_id[len(EXT_POP) :]))
        except ValueError:
            pass
    item: Any = None
    if external_id == EXT_JSON:
        try:
            item = json.loads(content)
        except ValueError:
            item = None
    elif external_id and external_id.startswith(EXT):
        item = _from_template(content, external_id[len(EXT) :])
    if not isinstance(item, dict):
        if role == "tool":
            item = {"role": "system", "content": f"[tool output, turn {turn_id}] {content}"}
        else:
            item = {"role": role, "content": content}
    return Entry(turn_id, role, content, item)
