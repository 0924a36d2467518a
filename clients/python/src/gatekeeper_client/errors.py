"""What a call can raise besides httpx's transport errors (the service could not be reached)."""

from __future__ import annotations

from typing import Any

from ._generated.models.verdict_response import VerdictResponse


class GatekeeperError(Exception):
    """Base of every error this client raises itself."""


class ProblemError(GatekeeperError):
    """The service answered an RFC 9457 problem (``application/problem+json``)."""

    def __init__(self, status: int, problem: dict[str, Any]):
        self.status = status
        self.problem = problem
        self.type: str = str(problem.get("type", ""))
        self.title: str = str(problem.get("title", ""))
        self.detail: str = str(problem.get("detail", ""))
        super().__init__(f"{status} {self.title}: {self.detail}")

    @property
    def slug(self) -> str:
        """The last segment of ``type``, e.g. ``conflict`` or ``not-found``."""
        return self.type.rsplit(":", 1)[-1]


class RejectedError(ProblemError):
    """A proposal the service rejected (``422 proposal-rejected``), with the whole ``verdict``."""

    def __init__(self, status: int, problem: dict[str, Any]):
        super().__init__(status, problem)
        self.verdict: VerdictResponse = VerdictResponse.from_dict(problem)


class UnexpectedResponse(GatekeeperError):
    """An answer that is neither the documented success body nor a problem."""

    def __init__(self, status: int, body: str):
        self.status = status
        self.body = body
        super().__init__(f"unexpected answer ({status}): {body[:200]}")


def error_for(status: int, problem: Any, text: str) -> GatekeeperError:
    if not isinstance(problem, dict) or "type" not in problem or "status" not in problem:
        return UnexpectedResponse(status, text)
    if str(problem["type"]).endswith(":proposal-rejected"):
        try:
            return RejectedError(status, problem)
        except (KeyError, TypeError, ValueError):
            pass
    return ProblemError(status, problem)
