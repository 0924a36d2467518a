"""``GatekeeperSummarizationMiddleware``: the hooks that log an agent's messages, compact its
history past the trigger, and hand the model the working context."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langchain.agents.middleware.summarization import ContextSize, TokenCounter
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain.chat_models import BaseChatModel, init_chat_model
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.config import get_config
from langgraph.runtime import Runtime

from .._client import Gatekeeper
from .._generated.models.outcome import Outcome
from .._generated.models.verdict_response import VerdictResponse
from ..errors import ProblemError, RejectedError
from ._compaction import DEFAULT_SUMMARY_PROMPT, plan_compaction, summarize
from ._log import Log, ensure_ids
from ._messages import context_messages

logger = logging.getLogger(__package__)  # the package's logger: the name users filter on


class GatekeeperSummarizationMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Summarizes an agent's history through the gatekeeper, which checks each summary.

    It works in ``wrap_model_call`` (and ``awrap_model_call``) rather than ``before_model``:
    there it can append what is new, compact, and hand the model the working context by
    overriding the request's messages, while the agent state keeps every message. ``after_agent``
    appends the agent's final answer, which no later model call would see.

    Token counting is LangChain's ``count_tokens_approximately`` by default, over the messages the
    model would get (the working context once there is a checkpoint), as LangChain's middleware
    counts; but without its usage-metadata scaling, since a model's reported usage is for a
    history this middleware has since compacted. The service counts its own tokens (tiktoken
    o200k_base) for the plan, the budget and the context's ``max_tokens``: the trigger is in the
    client's count, ``summary_budget`` and ``max_context_tokens`` in the service's.

    A gatekeeper that cannot be reached fails the model call, loudly, rather than let the log
    miss messages; retried (by the agent's retry middleware, or the next call), the append is
    applied once.
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        client: Gatekeeper,
        conversation: str | None = None,
        trigger: ContextSize | list[ContextSize] | None = None,
        keep: ContextSize = ("messages", 6),
        summary_budget: int = 512,
        max_summary_budget: int | None = None,
        max_context_tokens: int | None = None,
        token_counter: TokenCounter = count_tokens_approximately,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        pin: Callable[[BaseMessage], bool] | None = None,
        on_verdict: Callable[[VerdictResponse], None] | None = None,
        max_rounds: int = 3,
    ) -> None:
        """
        Args:
            model: The chat model that writes summaries (a model string for ``init_chat_model``).
            client: The gatekeeper to log to and propose to.
            conversation: The gatekeeper conversation; by default the LangGraph ``thread_id``.
            trigger: When to compact: ``("tokens", n)``, ``("messages", n)`` or
                ``("fraction", f)`` of the agent model's ``max_input_tokens``, or a list of them
                (any one). ``None``, as in LangChain, never compacts: messages are still logged.
            keep: The most recent messages no summary may take, ``("messages", n)`` or
                ``("tokens", n)``: the question being worked on and its tool round stay verbatim.
                A tool result is kept with the call it answers.
            summary_budget: Tokens (the service's count) a summary may take; the plan sizes the
                range from it. A turn of n tokens needs n/5 of it (a tool turn n/3) to be
                summarized at all.
            max_summary_budget: The most a summary's budget is raised to when the range is too
                small because its next turn does not fit ``summary_budget`` (a large tool
                result), so the plan does not stall before it: the plan names the budget that
                takes that turn in (``budget_for_next_turn``), and up to this one it is tried.
                Default 4 times ``summary_budget``; ``summary_budget`` itself to never raise it.
            max_context_tokens: Budget of the working context (the service's count); turns past
                it become stubs. ``None``: every uncovered turn verbatim.
            token_counter: Counts the tokens of the messages the model would get, for ``trigger``.
            summary_prompt: See ``DEFAULT_SUMMARY_PROMPT`` for its placeholders.
            pin: Which messages to pin: a pinned turn is never summarized (a standing
                instruction, a user constraint).
            on_verdict: Called with every verdict, rejected ones included.
            max_rounds: Compactions at most per model call while the context stays over the
                trigger.
        """
        super().__init__()
        self.model = init_chat_model(model) if isinstance(model, str) else model
        self._summary_model = self.model.with_retry(stop_after_attempt=3)
        self.client = client
        self.conversation = conversation
        triggers = [] if trigger is None else trigger if isinstance(trigger, list) else [trigger]
        self.trigger = [
            _checked(t, ("tokens", "messages", "fraction"), "trigger") for t in triggers
        ]
        self.keep = _checked(keep, ("tokens", "messages"), "keep")
        if summary_budget <= 0:
            raise ValueError(f"summary_budget must be positive, got {summary_budget}")
        self.summary_budget = summary_budget
        self.max_summary_budget = max(max_summary_budget or 4 * summary_budget, summary_budget)
        self.max_context_tokens = max_context_tokens
        self.token_counter = token_counter
        self.summary_prompt = summary_prompt
        self.pin = pin
        self.on_verdict = on_verdict
        self.max_rounds = max_rounds
        self._logs: dict[str, Log] = {}
        self._logs_lock = threading.Lock()

    # --- hooks ---------------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(self._prepare(request, self._conversation(request.runtime)))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[..., Any]
    ) -> Any:
        # The gatekeeper calls and the summary are blocking: off the event loop.
        conversation = self._conversation(request.runtime)
        return await handler(await asyncio.to_thread(self._prepare, request, conversation))

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._flush(list(state["messages"]), self._conversation(runtime))
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        await asyncio.to_thread(self._flush, list(state["messages"]), self._conversation(runtime))
        return None

    # --- the work --------------------------------------------------------------------------------

    def _conversation(self, runtime: Runtime[Any] | None) -> str:
        if self.conversation:
            return self.conversation
        thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
        if not thread:
            try:
                thread = get_config().get("configurable", {}).get("thread_id")
            except RuntimeError:  # outside a LangGraph run
                thread = None
        if not thread:
            raise ValueError(
                "no conversation: pass conversation=... or run the agent with a thread_id"
            )
        return str(thread)

    def _log(self, conversation: str) -> Log:
        with self._logs_lock:
            return self._logs.setdefault(conversation, Log())

    def _flush(self, messages: list[AnyMessage], conversation: str) -> None:
        ensure_ids(messages)
        log = self._log(conversation)
        with log.lock:
            log.append_new(self.client, conversation, messages, self.pin)

    def _prepare(self, request: ModelRequest[Any], conversation: str) -> ModelRequest[Any]:
        messages = list(request.messages)
        ensure_ids(messages)
        log = self._log(conversation)
        with log.lock:
            log.append_new(self.client, conversation, messages, self.pin)
            view = self._view(conversation, log, messages)
            for _ in range(self.max_rounds):
                if not self._over_trigger(view, request.model):
                    break
                if not self._compact(conversation, log, messages):
                    break
                view = self._view(conversation, log, messages)
        return request if view is messages else request.override(messages=view)

    def _view(self, conversation: str, log: Log, messages: list[AnyMessage]) -> list[AnyMessage]:
        """What the model gets: the working context once a checkpoint exists (before, it is the
        history itself)."""
        if log.checkpoint_id is None:
            return messages
        context = self.client.context(conversation, max_tokens=self.max_context_tokens)
        return context_messages(context, log.by_turn(messages))  # type: ignore[return-value]

    def _over_trigger(self, view: list[AnyMessage], model: BaseChatModel) -> bool:
        if not self.trigger:
            return False
        tokens = self.token_counter(view)
        for kind, value in self.trigger:
            if kind == "messages" and len(view) >= value:
                return True
            if kind == "tokens" and tokens >= value:
                return True
            if kind == "fraction":
                profile = getattr(model, "profile", None) or {}
                limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
                if not isinstance(limit, int):
                    raise ValueError(
                        "a fraction trigger needs the agent model's profile['max_input_tokens']"
                    )
                if tokens >= max(int(limit * value), 1):
                    return True
        return False

    def _last_compactable(self, log: Log, messages: Sequence[BaseMessage]) -> int:
        """The last turn a summary may take: the one before the first kept message."""
        kind, value = self.keep
        cut = len(messages)
        if kind == "messages":
            cut = max(len(messages) - int(value), 0)
        else:
            while cut > 0 and self.token_counter(messages[cut - 1 :]) <= value:
                cut -= 1
            cut = max(min(cut, len(messages) - 1), 0)  # the message being answered, at least
        if cut < len(messages) and isinstance(messages[cut], ToolMessage):
            call_id = messages[cut].tool_call_id  # type: ignore[attr-defined]
            for i in range(cut - 1, -1, -1):
                m = messages[i]
                if isinstance(m, AIMessage) and any(c.get("id") == call_id for c in m.tool_calls):
                    cut = i
                    break
        kept = [t for m in messages[cut:] if (t := log.turns.get(str(m.id), -1)) >= 0]
        return min(kept) - 1 if kept else log.next_id - 1

    def _compact(self, conversation: str, log: Log, messages: Sequence[BaseMessage]) -> bool:
        """One plan → summary → proposal. True when it made a checkpoint."""
        limit = self._last_compactable(log, messages)
        plan = plan_compaction(
            self.client, conversation, limit, self.summary_budget, self.max_summary_budget
        )
        if plan is None:
            return False
        to, budget = cast(int, plan.to), plan.summary_budget  # a plan that compacts has a `to`
        summary, finish_reason = summarize(
            self._summary_model,
            self.summary_prompt,
            self.client,
            conversation,
            plan,
            to,
            log.by_turn(messages),
        )
        if not summary:
            logger.warning("gatekeeper %s: the summarizer answered nothing", conversation)
            return False
        try:
            verdict = self.client.propose(
                conversation,
                plan.from_,
                to,
                summary,
                budget,
                finish_reason=finish_reason,
                expected_checkpoint=log.checkpoint_id,
            )
        except RejectedError as e:
            self._report(conversation, e.verdict)
            return False
        except ProblemError as e:
            if e.status != 409:
                raise
            # Another writer compacted since: take its checkpoint, plan again next call.
            latest = e.problem.get("latest_checkpoint")
            log.checkpoint_id = latest if isinstance(latest, int) else log.checkpoint_id
            logger.warning("gatekeeper %s: proposal conflicts: %s", conversation, e)
            return False
        self._report(conversation, verdict)
        if isinstance(verdict.checkpoint_id, int):
            log.checkpoint_id = verdict.checkpoint_id
            return True
        return False

    def _report(self, conversation: str, verdict: VerdictResponse) -> None:
        level = logging.INFO if verdict.outcome == Outcome.ACCEPTED else logging.WARNING
        logger.log(
            level,
            "gatekeeper %s: %s %d-%d, covered %s, uncovered %s, not compacted %s",
            conversation,
            verdict.outcome,
            verdict.from_,
            verdict.to,
            verdict.covered,
            verdict.uncovered,
            verdict.not_compacted,
        )
        if self.on_verdict is not None:
            self.on_verdict(verdict)


def _checked(size: ContextSize, kinds: tuple[str, ...], name: str) -> ContextSize:
    kind, value = size
    if kind not in kinds:
        raise ValueError(f"{name} takes {', '.join(kinds)}, not {kind!r}")
    if not value > 0 or (kind == "fraction" and value > 1):
        raise ValueError(f"{name} {kind} must be positive (a fraction at most 1), got {value}")
    return size
