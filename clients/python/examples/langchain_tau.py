"""One tau-bench airline conversation through a LangChain agent whose history the gatekeeper
compacts, offline: the agent's model replays the recorded assistant turns, its tools the recorded
tool results, and the summarizer is a fake that keeps the words the gatekeeper's plan lists. Each
verdict is printed as the service gives it.

    GATEKEEPER_URL=http://127.0.0.1:8080 python examples/langchain_tau.py [conversation index]

Environment: GATEKEEPER_URL (default http://127.0.0.1:8080), GATEKEEPER_API_KEY (optional),
TAU_DATA (default ../shared/data/tau-bench-airline.jsonl.gz next to the repository).
Swap ``KeepsAnchors`` for a real chat model (``init_chat_model("openai:gpt-4.1-mini")``) and
``Replay`` for the agent's own to run it for real.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
import uuid
from collections import defaultdict, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from gatekeeper_client import Gatekeeper
from gatekeeper_client.langchain import GatekeeperSummarizationMiddleware, gatekeeper_tools
from gatekeeper_client.models import VerdictResponse

REPO = Path(__file__).resolve().parents[3]
TAU = Path(
    os.environ.get("TAU_DATA", REPO.parent / "shared" / "data" / "tau-bench-airline.jsonl.gz")
)


class Replay(GenericFakeChatModel):
    """The agent's model: the recorded assistant turns, in order. Records what it was sent."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Replay:  # type: ignore[override]
        return self  # the script already holds the tool calls

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class KeepsAnchors(BaseChatModel):
    """A stand-in summarizer: one sentence holding every word the prompt's <must_keep> lists."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        block = messages[-1].text.split("<must_keep>")[1].split("</must_keep>")[0]
        words = [
            w
            for line in block.splitlines()
            if line.startswith("turn ")
            for w in json.loads(line.split(": ", 1)[1])
        ]
        text = "So far the agent and the customer covered " + ", ".join(dict.fromkeys(words)) + "."
        message = AIMessage(content=text, response_metadata={"finish_reason": "stop"})
        return ChatResult(generations=[ChatGeneration(message=message)])

    @property
    def _llm_type(self) -> str:
        return "keeps-anchors"


class RecordedTool(BaseTool):
    """A tau-bench tool answering with its recorded results, in order."""

    description: str = "A tau-bench airline tool (recorded)."
    results: deque[str]

    def _run(self, *args: Any, **kwargs: Any) -> str:
        return self.results.popleft()


def conversation(index: int) -> list[dict]:
    with gzip.open(TAU, "rt") as f:
        for i, line in enumerate(f):
            if i == index:
                return json.loads(line)["turns"]
    raise IndexError(f"{TAU} has no conversation {index}")


def script(turns: list[dict]) -> Iterator[AIMessage]:
    n = 0
    for t in turns:
        if t["role"] == "assistant":
            calls = []
            for c in t.get("tool_calls") or []:
                n += 1
                args = c["arguments"]
                args = json.loads(args) if isinstance(args, str) else args
                calls.append(
                    {"name": c["name"], "args": args, "id": f"call_{n}", "type": "tool_call"}
                )
            yield AIMessage(content=t.get("content") or "", tool_calls=calls)
    while True:
        yield AIMessage(content="Goodbye.")


def recorded_tools(turns: list[dict]) -> list[BaseTool]:
    results: defaultdict[str, deque[str]] = defaultdict(deque)
    for t in turns:
        if t["role"] == "tool":
            results[t["name"]].append(t.get("content") or "")
    return [RecordedTool(name=name, results=r) for name, r in results.items()]


def show(verdict: VerdictResponse) -> None:
    print(
        f"{verdict.outcome:<9} turns {verdict.from_}-{verdict.to}"
        f"  covered {verdict.covered}  uncovered {verdict.uncovered}"
        f"  not compacted {verdict.not_compacted}  checkpoint {verdict.checkpoint_id}"
    )


def main() -> None:
    # The middleware logs each verdict too (narrowed ones as warnings); here they are printed.
    logging.getLogger("gatekeeper_client.langchain").setLevel(logging.ERROR)
    index = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    turns = conversation(index)
    url = os.environ.get("GATEKEEPER_URL", "http://127.0.0.1:8080")
    name = f"langchain-tau-{index}-{uuid.uuid4().hex[:8]}"
    with Gatekeeper(url, os.environ.get("GATEKEEPER_API_KEY") or None) as client:
        model = Replay(messages=script(turns))
        middleware = GatekeeperSummarizationMiddleware(
            KeepsAnchors(),
            client=client,
            trigger=("tokens", 1200),
            keep=("messages", 4),
            summary_budget=512,
            on_verdict=show,
        )
        system = turns[0]["content"] if turns[0]["role"] == "system" else None
        agent = create_agent(
            model,
            # The recall tools ride along for a real model; the script never calls them.
            tools=[*recorded_tools(turns), *gatekeeper_tools(client, name)],
            system_prompt=system,
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        print(f"conversation {name} ({len(turns)} tau-bench turns) on {url}")
        config: Any = {"configurable": {"thread_id": name}}
        state: dict[str, Any] = {"messages": []}
        for t in turns:
            if t["role"] == "user":
                state = agent.invoke({"messages": [HumanMessage(t["content"])]}, config)

        messages = state["messages"]
        info = client.conversation(name)
        last = [m for m in model.calls[-1] if not isinstance(m, SystemMessage)]
        print(
            f"{len(messages)} messages, {info.next_id} turns in the raw log, "
            f"{info.checkpoints} checkpoints; the last model call got {len(last)} messages, "
            f"{count_tokens_approximately(last)} tokens (approx.) for a history of "
            f"{count_tokens_approximately(messages[:-1])}"
        )


if __name__ == "__main__":
    main()
