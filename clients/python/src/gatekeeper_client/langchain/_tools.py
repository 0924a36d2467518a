"""``recall_turn`` and ``search_history``: the tools that give an agent back what a summary left
out."""

from __future__ import annotations

import inspect
import json
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from .._client import Gatekeeper
from ..errors import ProblemError


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def gatekeeper_tools(client: Gatekeeper, conversation: str, *, limit: int = 5) -> list[BaseTool]:
    """``recall_turn`` and ``search_history`` for an agent whose context the gatekeeper compacted:
    a stub or a summary names a turn or lacks a word, and these get it back. Answers are compact
    JSON; a failed call (a turn the log does not hold) is a tool error the agent reads, not an
    exception that ends the run."""

    def recall_turn(turn: int) -> str:
        """Returns turn `turn` of this conversation: word for word from the raw log when no
        summary covers it, else the summary that stands for it (`source` says which)."""
        try:
            r = client.reconstruct(conversation, turn)
        except ProblemError as e:
            raise ToolException(str(e)) from e
        return _json({"turn": r.turn, "role": str(r.role), "source": str(r.source), "text": r.text})

    def search_history(query: str) -> str:
        """Finds the turns of this conversation holding the words of `query` (an id, a name, a
        date, an error), best first; recall_turn(turn) returns a hit whole."""
        try:
            answer = client.search(query, conversation, limit=limit)
        except ProblemError as e:
            raise ToolException(str(e)) from e
        hits = []
        for h in answer.hits:
            hit: dict[str, Any] = {
                "turn": h.turn,
                "role": str(h.role),
                "source": str(h.source),
                "snippet": h.snippet.text,
            }
            if isinstance(h.terms_in_summary, bool):
                hit["terms_in_summary"] = h.terms_in_summary
            hits.append(hit)
        return _json({"hits": hits, "ignored": list(answer.ignored)})

    return [
        StructuredTool.from_function(
            f, description=inspect.cleandoc(f.__doc__ or ""), handle_tool_error=True
        )
        for f in (recall_turn, search_history)
    ]
