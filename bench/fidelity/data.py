"""tau-bench airline conversations joined into long agent sessions."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "tau-bench-airline.jsonl.gz"
MIN_SESSION_TURNS = 400


@dataclass(frozen=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True)
class Session:
    index: int
    conversations: tuple[str, ...]
    turns: tuple[Turn, ...]


def render(turn: dict) -> str:
    """The turn's text as the service's CLI renders it (crates/tau-bench/src/lib.rs `TranscriptTurn::text`):
    the content, or, when it is empty and the turn calls tools, one `name(arguments)` line per call.
    """
    content = turn.get("content") or ""
    calls = turn.get("tool_calls") or []
    if content or not calls:
        return content
    return "\n".join(f"{c.get('name') or ''}({_arguments(c.get('arguments'))})" for c in calls)


def _arguments(value) -> str:
    # tau-bench stores arguments as JSON text; an inlined object is kept as its compact JSON.
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def read_conversations(path: Path = DEFAULT_DATA) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def build_sessions(conversations: list[dict], min_turns: int = MIN_SESSION_TURNS) -> list[Session]:
    """Consecutive conversations, in file order, joined until a session has `min_turns` turns.

    An agent session has one system prompt: it is kept only at the start of each session (every
    tau-bench conversation repeats the same policy prompt). A leftover tail shorter than
    `min_turns` is folded into the last session.
    """
    groups: list[tuple[list[str], list[Turn]]] = []
    names: list[str] = []
    turns: list[Turn] = []
    for conv in conversations:
        for raw in conv["turns"]:
            if raw["role"] == "system" and turns:
                continue
            turns.append(Turn(raw["role"], render(raw)))
        names.append(conv["conversation"])
        if len(turns) >= min_turns:
            groups.append((names, turns))
            names, turns = [], []
    if turns:
        if groups:
            # The tail's own system prompt is not repeated inside the last session.
            groups[-1][0].extend(names)
            groups[-1][1].extend(turns[1:] if turns[0].role == "system" else turns)
        else:
            groups.append((names, turns))
    return [Session(i, tuple(n), tuple(t)) for i, (n, t) in enumerate(groups)]
