"""What the LangChain tests share: fakes for the agent's model, its tools and the summarizer, a
client that records plans and proposals, and a tau-bench conversation driven through
``create_agent`` with the middleware.

The agent's model replays a real tau-bench airline conversation (its assistant turns, tool calls
included) and the agent's tools replay the recorded tool results, so the raw log, the plans and
the verdicts are those of real text; the summarizer is a fake that keeps every anchor its prompt
lists. Nothing here reaches the network.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Iterator
from typing import Any

from conftest import Service, tau_conversation
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from gatekeeper_client import Gatekeeper
from gatekeeper_client.langchain import GatekeeperSummarizationMiddleware
from gatekeeper_client.models import CompactionPlanResponse, VerdictResponse

TAU = 0  # 32 turns: a booking with searches, a failed payment and a retry


class ReplayModel(GenericFakeChatModel):
    """The agent's model: answers with the recorded assistant turns, and records every call."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ReplayModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class AnchorEcho(BaseChatModel):
    """The summarizer: a summary holding every anchor its prompt lists; records its prompts."""

    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        prompt = messages[-1].text
        self.prompts.append(prompt)
        block = prompt.split("<must_keep>")[1].split("</must_keep>")[0]
        anchors = [
            a
            for line in block.splitlines()
            if line.startswith("turn ")
            for a in json.loads(line.split(": ", 1)[1])
        ]
        text = "The agent and the customer went over " + ", ".join(dict.fromkeys(anchors)) + "."
        message = AIMessage(content=text, response_metadata={"finish_reason": "stop"})
        return ChatResult(generations=[ChatGeneration(message=message)])

    @property
    def _llm_type(self) -> str:
        return "anchor-echo"


class ReplayTool(BaseTool):
    """A tau-bench tool: answers each call with the next recorded result of that tool."""

    description: str = "A tau-bench airline tool, replayed."
    results: deque[str]

    def _run(self, *args: Any, **kwargs: Any) -> str:
        return self.results.popleft()


def script(turns: list[dict]) -> Iterator[AIMessage]:
    calls = 0
    for t in turns:
        if t["role"] != "assistant":
            continue
        tool_calls = []
        for c in t.get("tool_calls") or []:
            calls += 1
            args = c["arguments"]
            tool_calls.append(
                {
                    "name": c["name"],
                    "args": json.loads(args) if isinstance(args, str) else args,
                    "id": f"call_{calls}",
                    "type": "tool_call",
                }
            )
        yield AIMessage(content=t.get("content") or "", tool_calls=tool_calls)
    while True:  # the customer's last words get an answer too
        yield AIMessage(content="Goodbye.")


def replay_tools(turns: list[dict]) -> list[BaseTool]:
    results: defaultdict[str, deque[str]] = defaultdict(deque)
    for t in turns:
        if t["role"] == "tool":
            results[t["name"]].append(t.get("content") or "")
    return [ReplayTool(name=name, results=r) for name, r in results.items()]


class RecordingGatekeeper(Gatekeeper):
    """The real client, remembering the plans it was given and the proposals it made, in order."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.events: list[tuple[str, Any]] = []

    def plan(self, *args: Any, **kwargs: Any) -> CompactionPlanResponse:
        answer = super().plan(*args, **kwargs)
        self.events.append(("plan", answer))
        return answer

    def propose(
        self, conversation: str, from_: int, to: int, summary: str, budget: int, **kwargs: Any
    ) -> Any:
        self.events.append(("propose", (from_, to, budget)))
        return super().propose(conversation, from_, to, summary, budget, **kwargs)

    def plans(self) -> list[CompactionPlanResponse]:
        return [e for kind, e in self.events if kind == "plan"]

    def proposals(self) -> list[tuple[int, int, int]]:
        """(from, to, budget) of each proposal."""
        return [e for kind, e in self.events if kind == "propose"]


class Run:
    """One tau-bench conversation driven through ``create_agent`` with the middleware."""

    def __init__(self, service: Service, *, trigger: Any = ("tokens", 1200), index: int = TAU):
        self.turns = tau_conversation(index)
        self.conversation = f"langchain-tau-{index}"
        self.client = RecordingGatekeeper(service.url, service.key)
        self.model = ReplayModel(messages=script(self.turns))
        self.summarizer = AnchorEcho()
        self.verdicts: list[VerdictResponse] = []
        self.middleware = GatekeeperSummarizationMiddleware(
            self.summarizer,
            client=self.client,
            trigger=trigger,
            keep=("messages", 4),
            summary_budget=512,
            on_verdict=self.verdicts.append,
        )
        self.checkpointer = InMemorySaver()
        self.tools = replay_tools(self.turns)
        self.agent = self._agent(self.middleware)
        self.messages: list[BaseMessage] = []

    def _agent(self, middleware: GatekeeperSummarizationMiddleware) -> Any:
        system = self.turns[0]["content"]  # the airline policy: the agent's prompt, not history
        return create_agent(
            self.model,
            tools=self.tools,
            system_prompt=system,
            middleware=[middleware],
            checkpointer=self.checkpointer,
        )

    @property
    def config(self) -> Any:
        return {"configurable": {"thread_id": self.conversation}}

    def user_turns(self) -> list[str]:
        return [t["content"] for t in self.turns if t["role"] == "user"]

    def say(self, text: str) -> None:
        self.messages = self.agent.invoke({"messages": [HumanMessage(text)]}, self.config)[
            "messages"
        ]

    async def asay(self, text: str) -> None:
        answer = await self.agent.ainvoke({"messages": [HumanMessage(text)]}, self.config)
        self.messages = answer["messages"]

    def run(self) -> Run:
        for text in self.user_turns():
            self.say(text)
        return self

    def log(self) -> list[Any]:
        n = self.client.conversation(self.conversation).next_id
        return [self.client.turn(self.conversation, i) for i in range(n)]


def without_system(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if not isinstance(m, SystemMessage)]


def assert_tool_pairs_valid(messages: list[BaseMessage]) -> None:
    """What chat providers demand: each tool result right after the call it answers, and every
    call answered."""
    pending: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in pending, f"a tool result without its call: {m!r}"
            pending.discard(m.tool_call_id)
            continue
        assert not pending, f"tool calls {pending} left unanswered before {m!r}"
        if isinstance(m, AIMessage) and m.tool_calls:
            pending = {c["id"] for c in m.tool_calls}
    assert not pending
