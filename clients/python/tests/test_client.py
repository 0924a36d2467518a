"""The facade against the real service: every method, every error type, retries and their
Idempotency-Key, the blocking and the awaitable client."""

from __future__ import annotations

import httpx
import pytest
from conftest import running_service, tau_turns

from gatekeeper_client import (
    AsyncGatekeeper,
    Gatekeeper,
    ProblemError,
    RejectedError,
    UnexpectedResponse,
)
from gatekeeper_client.models import Outcome, Role, Source

BUDGET = 400


def kept_summary(gk: Gatekeeper, conversation: str, budget: int) -> tuple[int, int, str]:
    """A summary that keeps every anchor the plan asks for: the range it proposes and its text."""
    plan = gk.plan(conversation, budget)
    assert plan.to is not None, plan
    anchors = [a for t in plan.turns for a in t.anchors]
    return plan.from_, plan.to, "Earlier: " + "; ".join(anchors)


def test_appends_plans_proposes_and_reads_back_a_real_conversation(service):
    turns = tau_turns(0)
    with Gatekeeper(service.url, api_key=service.key) as gk:
        appended = gk.append("airline-0", turns)
        assert appended.appended == len(turns)
        assert [t.id for t in appended.turns] == list(range(len(turns)))
        assert gk.conversation("airline-0").next_id == len(turns)
        stored = gk.turn("airline-0", 1)
        assert stored.content == turns[1]["content"] and stored.role == Role.USER

        from_, to, summary = kept_summary(gk, "airline-0", BUDGET)
        verdict = gk.propose("airline-0", from_, to, summary, BUDGET)
        assert verdict.outcome in (Outcome.ACCEPTED, Outcome.NARROWED)
        assert verdict.checkpoint_id == 1
        first_covered = verdict.covered[0][0]

        answer = gk.reconstruct("airline-0", first_covered)
        assert answer.source == Source.SUMMARY and answer.text == summary
        live = gk.reconstruct("airline-0", len(turns) - 1)
        assert live.source == Source.LIVE and live.text == turns[-1]["content"]

        listed = gk.checkpoints("airline-0")
        assert [c.checkpoint_id for c in listed.checkpoints] == [1]
        assert gk.checkpoint("airline-0", 1).summary == summary

        whole = gk.context("airline-0")
        assert whole.items[0].text == summary
        tight = gk.context("airline-0", max_tokens=whole.total_tokens - 1)
        assert tight.total_tokens <= whole.total_tokens - 1 or tight.fits is False


def test_a_dry_run_persists_nothing_and_pinning_keeps_a_turn_out_of_summaries(service):
    turns = tau_turns(1)
    with Gatekeeper(service.url, api_key=service.key) as gk:
        gk.append("airline-1", turns)
        from_, to, summary = kept_summary(gk, "airline-1", BUDGET)
        dry = gk.propose("airline-1", from_, to, summary, BUDGET, dry_run=True)
        assert dry.dry_run and dry.checkpoint_id is None
        assert gk.conversation("airline-1").checkpoints == 0

        assert gk.set_pinned("airline-1", from_, True).pinned
        verdict = gk.propose("airline-1", from_, to, summary, BUDGET)
        assert [from_, from_] not in verdict.covered
        assert gk.reconstruct("airline-1", from_).source == Source.RAW_LOG
        assert gk.set_pinned("airline-1", from_, False).pinned is False


def test_search_finds_a_turn_by_a_word_in_it_in_one_conversation_and_tenant_wide(service):
    with Gatekeeper(service.url, api_key=service.key) as gk:
        gk.append("airline-2", tau_turns(2))
        gk.append("other-3", tau_turns(3))
        word = "reservation"
        hits = gk.search(word, "airline-2").hits
        assert hits and all(h.conversation == "airline-2" for h in hits)
        assert word in gk.turn("airline-2", hits[0].turn).content.lower()
        tenant = gk.search(word, limit=50).hits
        assert {h.conversation for h in tenant} == {"airline-2", "other-3"}
        only = gk.search(word, conversation_prefix="other").hits
        assert only and {h.conversation for h in only} == {"other-3"}
        with pytest.raises(ValueError):
            gk.search(word, "airline-2", conversation_prefix="x")


def test_a_rejected_proposal_raises_rejected_error_with_the_whole_verdict(service):
    with Gatekeeper(service.url, api_key=service.key) as gk:
        gk.append("airline-4", tau_turns(4))
        with pytest.raises(RejectedError) as raised:
            gk.propose("airline-4", 0, 5, "Nothing from those turns.", BUDGET)
        e = raised.value
        assert e.status == 422 and e.slug == "proposal-rejected"
        assert e.verdict.outcome == Outcome.REJECTED and e.verdict.covered == []
        assert gk.conversation("airline-4").checkpoints == 0


def test_problems_raise_problem_error_with_status_type_title_and_detail(service):
    with Gatekeeper(service.url, api_key=service.key) as gk:
        with pytest.raises(ProblemError) as missing:
            gk.reconstruct("never-appended", 0)
        assert missing.value.status == 404 and missing.value.slug == "not-found"
        assert missing.value.title and missing.value.detail
        assert missing.value.problem["status"] == 404
        assert not isinstance(missing.value, RejectedError)

        gk.append("airline-5", tau_turns(5)[:3])
        with pytest.raises(ProblemError) as gap:
            gk.append("airline-5", [{"id": 9, "role": "user", "content": "a gap"}])
        assert gap.value.status in (409, 422)

    with Gatekeeper(service.url, api_key="wrong-key-0123456789") as stranger:
        with pytest.raises(ProblemError) as denied:
            stranger.conversation("airline-5")
        assert denied.value.status == 401 and denied.value.slug == "unauthorized"


def test_an_answer_that_is_not_a_problem_raises_unexpected_response(service):
    # What a proxy in front of the service answers when the service is gone.
    html = httpx.MockTransport(lambda request: httpx.Response(502, text="<html>Bad Gateway</html>"))
    http = httpx.Client(base_url=service.url, transport=html)
    with Gatekeeper(service.url, api_key=service.key, http=http) as gk:
        with pytest.raises(UnexpectedResponse) as raised:
            gk.conversation("airline-5")
    assert raised.value.status == 502 and "Bad Gateway" in raised.value.body


class FirstAnswers503(httpx.BaseTransport):
    """Answers the first `failures` requests 503 with Retry-After 0 itself, then forwards to the
    real service; records every request's Idempotency-Key."""

    def __init__(self, failures: int):
        self.failures = failures
        self.keys: list[str | None] = []
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("idempotency-key"))
        if len(self.keys) <= self.failures:
            return httpx.Response(
                503,
                headers={"retry-after": "0", "content-type": "application/problem+json"},
                json={"type": "urn:gatekeeper:problem:unavailable", "title": "Service Unavailable",
                      "status": 503, "detail": "injected"},
            )  # fmt: skip
        return self.inner.handle_request(request)


def test_a_503_is_retried_with_the_same_idempotency_key_until_the_service_answers_201(service):
    transport = FirstAnswers503(failures=2)
    http = httpx.Client(base_url=service.url, transport=transport)
    with Gatekeeper(service.url, api_key=service.key, backoff=0.01, http=http) as gk:
        appended = gk.append("airline-6", tau_turns(6)[:4])
    assert appended.appended == 4
    assert len(transport.keys) == 3 and transport.keys[0] and len(set(transport.keys)) == 1


def test_retries_stop_after_the_configured_count_and_raise_the_503(service):
    transport = FirstAnswers503(failures=10)
    http = httpx.Client(base_url=service.url, transport=transport)
    with Gatekeeper(service.url, api_key=service.key, retries=2, backoff=0.01, http=http) as gk:
        with pytest.raises(ProblemError) as raised:
            gk.append("airline-7", tau_turns(7)[:2])
    assert raised.value.status == 503 and len(transport.keys) == 3


def test_a_rate_limited_call_waits_for_retry_after_and_then_succeeds(tmp_path):
    limits = {"GATEKEEPER_RATE_LIMIT_PER_SEC": "2", "GATEKEEPER_RATE_LIMIT_BURST": "1"}
    with running_service(tmp_path, **limits) as s:
        raw = httpx.Client(base_url=s.url, headers={"authorization": f"Bearer {s.key}"})
        raw.get("/v1/conversations/x")
        assert raw.get("/v1/conversations/x").status_code == 429, "the limit is not in force"
        with Gatekeeper(s.url, api_key=s.key, backoff=0.05) as gk:
            assert gk.append("airline-8", tau_turns(8)[:2]).appended == 2
            assert gk.conversation("airline-8").next_id == 2


def test_a_retried_append_with_the_callers_key_is_applied_once(service):
    turns = tau_turns(9)[:3]
    with Gatekeeper(service.url, api_key=service.key) as gk:
        first = gk.append("airline-9", turns, idempotency_key="append-airline-9-a")
        again = gk.append("airline-9", turns, idempotency_key="append-airline-9-a")
        assert first.appended == 3 and again.turns == first.turns
        assert gk.conversation("airline-9").next_id == 3


def test_a_base_url_without_a_scheme_is_refused():
    with pytest.raises(ValueError):
        Gatekeeper("127.0.0.1:8080")


async def test_the_async_client_has_the_same_methods_and_errors(service):
    turns = tau_turns(10)
    async with AsyncGatekeeper(service.url, api_key=service.key) as gk:
        assert await gk.ready()
        appended = await gk.append("airline-10", turns)
        assert appended.next_id == len(turns)
        plan = await gk.plan("airline-10", BUDGET)
        summary = "Earlier: " + "; ".join(a for t in plan.turns for a in t.anchors)
        verdict = await gk.propose("airline-10", plan.from_, plan.to, summary, BUDGET)
        assert verdict.checkpoint_id == 1
        assert (await gk.reconstruct("airline-10", verdict.covered[0][0])).text == summary
        assert (await gk.context("airline-10")).items[0].text == summary
        assert (await gk.conversation("airline-10")).checkpoints == 1
        assert (await gk.checkpoints("airline-10")).checkpoints[0].checkpoint_id == 1
        assert (await gk.checkpoint("airline-10", 1)).summary == summary
        assert (await gk.turn("airline-10", 0)).content == turns[0]["content"]
        assert (await gk.set_pinned("airline-10", len(turns) - 1, True)).pinned
        assert (await gk.search("reservation", "airline-10")).query == "reservation"
        with pytest.raises(RejectedError):
            await gk.propose("airline-10", verdict.advanced_to or 0, len(turns) - 1, "none", BUDGET)
        with pytest.raises(ProblemError):
            await gk.reconstruct("never-appended", 0)


class Positions(httpx.BaseTransport):
    """Forwards to the real service, stamps write answers with rising positions as a service
    with read replicas does, and records the Gatekeeper-Min-Position each read sent."""

    def __init__(self):
        self.inner = httpx.HTTPTransport()
        self.writes = 0
        self.sent: list[tuple[str, str | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "GET":
            self.sent.append((request.url.path, request.headers.get("gatekeeper-min-position")))
        else:
            self.writes += 1
            response.headers["gatekeeper-position"] = f"{self.writes:X}/0"
        return response


def test_reads_carry_the_newest_position_their_conversations_writes_answered(service):
    transport = Positions()
    http = httpx.Client(base_url=service.url, transport=transport)
    with Gatekeeper(service.url, api_key=service.key, http=http) as gk:
        gk.append("airline-11", tau_turns(11)[:2])  # position 1/0
        gk.append("other-12", tau_turns(12)[:2])  # 2/0
        gk.append("airline-11", tau_turns(11)[2:4])  # 3/0
        gk.reconstruct("airline-11", 0)
        gk.turn("other-12", 1)
        gk.search("reservation")
        with pytest.raises(ProblemError):
            gk.conversation("never-written")
    assert transport.sent == [
        ("/v1/conversations/airline-11/reconstruct/0", "3/0"),
        ("/v1/conversations/other-12/turns/1", "2/0"),
        ("/v1/search", "3/0"),
        ("/v1/conversations/never-written", None),
    ]
