"""LangChain v1: a summarization middleware whose compactions the gatekeeper checks, and tools that
give an agent back what a summary left out.

``GatekeeperSummarizationMiddleware`` takes the place of LangChain's ``SummarizationMiddleware``
(the same ``model``, ``trigger``, ``keep``, ``token_counter`` and ``summary_prompt`` arguments).
LangChain's replaces the agent's messages with a summary and trusts it; this one

1. appends every message of the agent state to the gatekeeper's raw log, once, so nothing a
   summary drops is lost;
2. past the trigger, asks the gatekeeper which range to summarize and which words the summary
   must keep (``compaction-plan``), has ``model`` write it and proposes it: the service keeps only
   what the summary really covers;
3. sends the model the gatekeeper's working context (summaries, the turns no summary covers, stubs
   for what does not fit) instead of the raw history. It rewrites the model request, never the
   agent state: the raw log is the record, the state stays the agent's.

``gatekeeper_tools`` gives the agent ``recall_turn`` and ``search_history`` to get a turn back.

The modules behind it: ``_messages`` (messages ↔ turns, rendering a working context), ``_log``
(what this process knows of a raw log, and appending to it), ``_compaction`` (plan, summarize),
``_middleware`` (the hooks) and ``_tools``.
"""

try:
    import langchain  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "this integration needs the [langchain] extra: pip install 'gatekeeper-client[langchain]'"
    ) from e

from ._compaction import DEFAULT_SUMMARY_PROMPT
from ._messages import context_messages, message_role, message_text
from ._middleware import GatekeeperSummarizationMiddleware
from ._tools import gatekeeper_tools

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "GatekeeperSummarizationMiddleware",
    "context_messages",
    "gatekeeper_tools",
    "message_role",
    "message_text",
]
