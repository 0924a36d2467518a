"""A client for the compaction gatekeeper.

``Gatekeeper`` / ``AsyncGatekeeper`` call the REST API and answer with the models generated from
``openapi.yaml`` (``gatekeeper_client.models``); failures raise ``ProblemError`` (a problem+json
answer), its subclass ``RejectedError`` (a rejected proposal, with the whole verdict) or
``UnexpectedResponse``; transport failures are httpx's own exceptions.

Integrations: ``gatekeeper_client.langchain`` (extra ``[langchain]``) and
``gatekeeper_client.openai_agents`` (extra ``[openai-agents]``).
"""

from . import models
from ._client import AsyncGatekeeper, Gatekeeper
from .errors import GatekeeperError, ProblemError, RejectedError, UnexpectedResponse

__all__ = [
    "AsyncGatekeeper",
    "Gatekeeper",
    "GatekeeperError",
    "ProblemError",
    "RejectedError",
    "UnexpectedResponse",
    "models",
]
