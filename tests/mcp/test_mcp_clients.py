"""The MCP tools through the official Python SDK (`mcp`), over streamable HTTP (`/mcp` on the
service's listener) and over stdio (`gatekeeper mcp`), against a running service on a fresh
database. Run by .ci/mcp.sh, which starts the service and sets GATEKEEPER_URL, GATEKEEPER_KEY,
GATEKEEPER_BIN and TAU_DATA."""

import contextlib
import gzip
import json
import os

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL = os.environ["GATEKEEPER_URL"]
KEY = os.environ["GATEKEEPER_KEY"]
BIN = os.environ["GATEKEEPER_BIN"]
TAU = os.environ["TAU_DATA"]
AUTH = {"authorization": f"Bearer {KEY}"}
TOOLS = {"search_history", "recall_turn", "working_context", "coverage"}


def tau_turns(index):
    """A real tau-bench conversation's turns, as `gatekeeper append` sends them."""
    with gzip.open(TAU, "rt") as f:
        row = json.loads(f.readlines()[index])
    turns = []
    for t in row["turns"]:
        text = t.get("content") or ""
        if not text and t.get("tool_calls"):
            text = "\n".join(
                f"{c.get('name') or ''}({c['arguments'] if isinstance(c.get('arguments'), str) else json.dumps(c.get('arguments'), separators=(',', ':'))})"
                for c in t["tool_calls"]
            )
        if text.strip():
            turns.append({"role": t["role"], "content": text})
    return turns


def rest(method, path, body=None, key=KEY):
    headers = {"authorization": f"Bearer {key}"} if key else {}
    with httpx2.Client(base_url=URL, headers=headers, timeout=30) as c:
        r = c.request(method, path, json=body)
    return r.status_code, r.json()


@contextlib.asynccontextmanager
async def session(transport):
    """An initialized MCP session over `transport` ("http" or "stdio")."""
    async with contextlib.AsyncExitStack() as stack:
        if transport == "http":
            client = await stack.enter_async_context(create_mcp_http_client(headers=AUTH))
            read, write = await stack.enter_async_context(streamable_http_client(f"{URL}/mcp", http_client=client))
        else:
            server = StdioServerParameters(command=BIN, args=["mcp", "--url", URL, "--key", KEY])
            read, write = await stack.enter_async_context(stdio_client(server))
        s = await stack.enter_async_context(ClientSession(read, write))
        await s.initialize()
        yield s


def run(coro):
    return anyio.run(coro)


def structured(result):
    assert not result.is_error, result.content
    text = json.loads(result.content[0].text)
    assert result.structured_content == text, "the same JSON as structured content and as text"
    return result.structured_content


def appended(conversation, index=0):
    turns = tau_turns(index)
    status, body = rest("POST", f"/v1/conversations/{conversation}/turns", {"turns": turns})
    assert status == 201, body
    return turns


TRANSPORTS = ["http", "stdio"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_four_tools_are_listed_with_descriptions_and_argument_schemas(transport):
    async def main():
        async with session(transport) as s:
            listed = await s.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert set(tools) == TOOLS
            assert tools["search_history"].input_schema["required"] == ["query"]
            assert set(tools["search_history"].input_schema["properties"]) == {"query", "conversation", "limit"}
            assert set(tools["recall_turn"].input_schema["required"]) == {"conversation", "turn"}
            assert set(tools["working_context"].input_schema["properties"]) == {"conversation", "max_tokens"}
            assert set(tools["coverage"].input_schema["properties"]) == {"conversation", "checkpoint_id"}
            assert all(len(t.description) > 100 for t in tools.values())

    run(main)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_tool_answers_exactly_what_its_rest_endpoint_answers(transport):
    c = f"same-{transport}"
    appended(c)
    status, plan = rest("GET", f"/v1/conversations/{c}/compaction-plan?summary_budget=100000")
    summary = " ".join(a for t in plan["turns"] for a in t["anchors"])
    status, verdict = rest("POST", f"/v1/conversations/{c}/compactions",
                           {"from": plan["from"], "to": plan["to"], "summary": summary, "summary_budget": 100000})
    assert status == 201, verdict

    async def main():
        async with session(transport) as s:
            pairs = [
                ("search_history", {"query": "mia_li_3668", "conversation": c}, f"/v1/conversations/{c}/search?q=mia_li_3668"),
                ("search_history", {"query": "HAT136", "limit": 3}, "/v1/search?q=HAT136&limit=3"),
                ("recall_turn", {"conversation": c, "turn": 3}, f"/v1/conversations/{c}/reconstruct/3"),
                ("working_context", {"conversation": c}, f"/v1/conversations/{c}/context"),
                ("working_context", {"conversation": c, "max_tokens": 500}, f"/v1/conversations/{c}/context?max_tokens=500"),
                ("coverage", {"conversation": c}, f"/v1/conversations/{c}/compactions/{verdict['checkpoint_id']}"),
                ("coverage", {"conversation": c, "checkpoint_id": verdict["checkpoint_id"]}, f"/v1/conversations/{c}/compactions/{verdict['checkpoint_id']}"),
            ]
            for tool, args, path in pairs:
                got = structured(await s.call_tool(tool, args))
                status, want = rest("GET", path)
                assert status == 200, want
                assert got == want, (tool, args)
            # A conversation never compacted: coverage answers its log's state.
            appended(f"{c}-fresh", 1)
            got = structured(await s.call_tool("coverage", {"conversation": f"{c}-fresh"}))
            assert got["latest_checkpoint"] is None and got["next_id"] > 0

    run(main)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_arguments_and_failed_reads_are_tool_errors_and_the_session_goes_on(transport):
    c = f"errors-{transport}"
    appended(c)

    async def main():
        async with session(transport) as s:
            cases = [
                ("recall_turn", {"conversation": c}, "missing field `turn`"),
                ("recall_turn", {"conversation": c, "turn": "three"}, "invalid type"),
                ("search_history", {"q": "x"}, "unknown field `q`"),
                ("recall_turn", {"conversation": c, "turn": 9999}, "404 Not Found"),
                ("search_history", {"query": "flight", "conversation": c, "limit": 0}, "400 Bad Request"),
                ("working_context", {"conversation": "nobody"}, "404 Not Found"),
                ("coverage", {"conversation": c, "checkpoint_id": 7}, "404 Not Found"),
                ("no_such_tool", {}, "no tool named"),
            ]
            for tool, args, message in cases:
                result = await s.call_tool(tool, args)
                assert result.is_error, (tool, args)
                assert message in result.content[0].text, (tool, args, result.content[0].text)
            problem = (await s.call_tool("recall_turn", {"conversation": c, "turn": 9999})).structured_content
            assert problem["status"] == 404 and "not in the log" in problem["detail"]
            # The session is still good.
            assert structured(await s.call_tool("recall_turn", {"conversation": c, "turn": 0}))["turn"] == 0

    run(main)


def test_mcp_over_http_needs_the_key_and_sees_only_the_keys_tenant():
    with httpx2.Client(base_url=URL, timeout=30) as c:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        accept = {"accept": "application/json, text/event-stream"}
        r = c.post("/mcp", json=init, headers=accept)
        assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
        r = c.post("/mcp", json=init, headers={**accept, "authorization": "Bearer not-a-key-0123456789"})
        assert r.status_code == 401
        r = c.post("/mcp", json=init, headers={**accept, **AUTH})
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_turn_a_summary_left_out_is_stubbed_found_by_a_word_and_recalled_byte_exact(transport):
    c = f"recall-{transport}"
    turns = appended(c)
    status, plan = rest("GET", f"/v1/conversations/{c}/compaction-plan?summary_budget=100000")
    planned = {t["id"]: t["anchors"] for t in plan["turns"]}
    # Leave out the biggest turn the plan anchors whose anchors no other turn's anchors bring in.
    others = lambda k: {a.lower() for i, a_s in planned.items() if i != k for a in a_s}
    omitted = max((k for k, a_s in planned.items() if a_s and any(a.lower() not in others(k) for a in a_s)),
                  key=lambda k: len(turns[k]["content"]))
    summary = " ".join(a for i, a_s in planned.items() if i != omitted for a in a_s)
    status, verdict = rest("POST", f"/v1/conversations/{c}/compactions",
                           {"from": plan["from"], "to": plan["to"], "summary": summary, "summary_budget": 100000})
    assert status == 201, verdict
    assert any(r[0] <= omitted <= r[1] for r in verdict["uncovered"]), verdict["uncovered"]
    word = next(a for a in planned[omitted] if a.lower() not in others(omitted))

    async def main():
        async with session(transport) as s:
            context = structured(await s.call_tool("working_context", {"conversation": c, "max_tokens": 1}))
            stubs = [i for i in context["items"] if i["type"] == "stub"]
            assert omitted in [i["id"] for i in stubs], "the omitted turn is a stub"
            found = structured(await s.call_tool("search_history", {"query": word, "conversation": c}))
            hit = next(h for h in found["hits"] if h["turn"] == omitted)
            assert hit["source"] == "raw_log"
            recalled = structured(await s.call_tool("recall_turn", {"conversation": c, "turn": omitted}))
            assert recalled["source"] == "raw_log"
            assert recalled["text"] == turns[omitted]["content"], "byte-exact"

    run(main)
