"""Shared by the Agents SDK tests: a scripted model replaying tau-bench, and the items and checks.

A scripted model replays a real tau-bench airline conversation: each user turn is one
``Runner.run``, the agent's tool calls run real ``FunctionTool``s that answer with the recorded
tool output, so messages, ``function_call`` and ``function_call_output`` items all flow through
the session exactly as they would with a real model. No network: the model is local.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import agents
from agents import Agent, FunctionTool, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from conftest import tau_conversation
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from gatekeeper_client import AsyncGatekeeper
from gatekeeper_client.openai_agents import GatekeeperSession, decode_turn

os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-used")  # never sent: the model is local
agents.set_tracing_disabled(True)


# --- a scripted model replaying tau-bench --------------------------------------------------------


@dataclass
class Run:
    user: str
    responses: list[list[Any]] = field(default_factory=list)


@dataclass
class Script:
    runs: list[Run]
    outputs: dict[str, str]  # tool output by call id
    tool_names: list[str]


def _message(text: str, item_id: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id,
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        role="assistant",
        status="completed",
        type="message",
    )


def tau_script(index: int) -> Script:
    """One run per user turn of tau-bench conversation ``index``; each run's model responses in
    order, ending on a text answer; the recorded tool outputs keyed by the call ids given here."""
    runs: list[Run] = []
    outputs: dict[str, str] = {}
    pending: list[str] = []
    names: list[str] = []
    seq = 0
    for t in tau_conversation(index):
        if t["role"] == "user":
            runs.append(Run(t["content"]))
        elif runs and t["role"] == "assistant":
            out: list[Any] = []
            if t.get("content"):
                seq += 1
                out.append(_message(t["content"], f"msg_{index}_{seq}"))
            for c in t.get("tool_calls") or []:
                seq += 1
                call_id = f"call_{index}_{seq}"
                args = c["arguments"]
                args = args if isinstance(args, str) else json.dumps(args)
                out.append(
                    ResponseFunctionToolCall(
                        arguments=args, call_id=call_id, name=c["name"], type="function_call",
                        id=f"fc_{index}_{seq}", status="completed",
                    )
                )  # fmt: skip
                pending.append(call_id)
                names.append(c["name"])
            runs[-1].responses.append(out)
        elif runs and t["role"] == "tool" and pending:
            outputs[pending.pop(0)] = t["content"]
    for run in runs:
        merged: list[list[Any]] = []
        carry: list[Any] = []
        for response in run.responses:
            carry += response
            if any(isinstance(o, ResponseFunctionToolCall) for o in carry):
                merged.append(carry)
                carry = []
        if carry:
            merged.append(carry)
        if not merged or any(isinstance(o, ResponseFunctionToolCall) for o in merged[-1]):
            seq += 1
            merged.append([_message("Done.", f"msg_{index}_{seq}")])
        run.responses = merged
    return Script([r for r in runs if r.responses], outputs, sorted(set(names)))


class ScriptedModel(Model):
    """Answers each model call with the next scripted response; keeps every input it was sent."""

    def __init__(self, responses: list[list[Any]]):
        self.responses = list(responses)
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kwargs) -> ModelResponse:  # fmt: skip
        self.inputs.append(json.loads(json.dumps(input)))
        return ModelResponse(output=self.responses.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def tau_agent(script: Script) -> tuple[Agent, ScriptedModel]:
    async def answer(ctx: Any, _args: str) -> str:
        return script.outputs.get(ctx.tool_call_id, "{}")

    tools = [
        FunctionTool(
            name=name, description=f"tau-bench airline tool {name}", on_invoke_tool=answer,
            params_json_schema={"type": "object", "additionalProperties": True},
            strict_json_schema=False,
        )
        for name in script.tool_names
    ]  # fmt: skip
    model = ScriptedModel([r for run in script.runs for r in run.responses])
    return Agent(name="airline", instructions="Help the customer.", model=model, tools=tools), model


class RecordingSession(GatekeeperSession):
    """Keeps a JSON copy of every batch the SDK adds."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.added: list[dict[str, Any]] = []

    async def add_items(self, items: list[Any]) -> None:
        self.added += json.loads(json.dumps(items))
        await super().add_items(items)


async def replay(session: GatekeeperSession, index: int, runs: int | None = None) -> ScriptedModel:
    script = tau_script(index)
    agent, model = tau_agent(script)
    for run in script.runs[:runs]:
        await Runner.run(agent, run.user, session=session, max_turns=30)
    if runs is None:
        assert not model.responses, "every scripted response was used"
    return model


# --- helpers -------------------------------------------------------------------------------------


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def readable(item: dict[str, Any]) -> str:
    """What the raw log must hold for ``item``, written out independently of the package."""
    if item.get("type") == "function_call":
        return f"{item['name']}({item['arguments']})"
    if item.get("type") == "function_call_output":
        return item["output"]
    content = item["content"]
    return content if isinstance(content, str) else content[0]["text"]


async def raw_log(gk: AsyncGatekeeper, conv: str) -> list[Any]:
    n = (await gk.conversation(conv)).next_id
    return [await gk.turn(conv, i) for i in range(n)]


def item_turns(log: list[Any]) -> list[Any]:
    """The turns that store items (not the session's own markers)."""
    return [
        t for t in log if decode_turn(t.id, t.role.value, t.content, t.external_id).item is not None
    ]


def is_summary(item: dict[str, Any]) -> bool:
    return str(item.get("content", "")).startswith("Summary of earlier turns")


def assert_pairs_whole(items: list[dict[str, Any]]) -> None:
    """Every output follows its call, every call (but a trailing batch) has its output."""
    seen_calls: set[str] = set()
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    for n, item in enumerate(items):
        if item.get("type") == "function_call":
            seen_calls.add(item["call_id"])
            trailing = all(later.get("type") == "function_call" for later in items[n + 1 :])
            assert item["call_id"] in outputs or trailing, f"call without output: {item}"
        if item.get("type") == "function_call_output":
            assert item["call_id"] in seen_calls, f"orphan function_call_output: {item}"


def keep_anchors(turns: list[dict[str, Any]], must_keep: list[str], budget: int) -> str:
    """A summarizer that keeps exactly what the gatekeeper asks for."""
    return "Summary: " + "; ".join(must_keep) + "."


async def async_keep_anchors(turns: list[dict[str, Any]], must_keep: list[str], budget: int) -> str:
    return keep_anchors(turns, must_keep, budget)


USER = {"content": "Please look up user mia_li_3668.", "role": "user"}
CALL = {
    "arguments": '{"user_id":"mia_li_3668"}', "call_id": "call_1", "name": "get_user_details",
    "type": "function_call", "id": "fc_1", "status": "completed",
}  # fmt: skip
BIG_OUTPUT = json.dumps(
    {"user_id": "mia_li_3668", "reservations": [f"RES{n:04d}X" for n in range(400)]}
)
OUTPUT = {"call_id": "call_1", "output": BIG_OUTPUT, "type": "function_call_output"}
ANSWER = {
    "id": "msg_2", "role": "assistant", "status": "completed", "type": "message",
    "content": [{"annotations": [], "text": "Mia has 400 reservations.", "type": "output_text"}],
}  # fmt: skip
