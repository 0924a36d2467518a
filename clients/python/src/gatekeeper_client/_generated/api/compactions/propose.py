from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.compaction_request_body import CompactionRequestBody
from ...models.problem import Problem
from ...models.verdict_response import VerdictResponse
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    conversation: str,
    *,
    body: CompactionRequestBody,
    idempotency_key: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key



    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/conversations/{conversation}/compactions".format(conversation=quote(str(conversation), safe=""),),
    }

    _kwargs["json"] = body.to_dict()


    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | VerdictResponse | None:
    if response.status_code == 200:
        response_200 = VerdictResponse.from_dict(response.json())



        return response_200

    if response.status_code == 201:
        response_201 = VerdictResponse.from_dict(response.json())



        return response_201

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())



        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())



        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())



        return response_415

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())



        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())



        return response_429

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | VerdictResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    conversation: str,
    *,
    client: AuthenticatedClient,
    body: CompactionRequestBody,
    idempotency_key: str | Unset = UNSET,

) -> Response[Problem | VerdictResponse]:
    """ Propose a compaction

     Decides which turns of [from, to] the summary really covers and persists only that pointer set. A
    rejected verdict is 422 problem+json carrying the whole verdict, and persists nothing.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (CompactionRequestBody):  Example: {'end_marker': '</summary>', 'finish_reason':
            'stop', 'from': 0, 'summary': '<summary>Mia (user mia_li_3668) wants a flight from New
            York to Seattle on May 20th.</summary>', 'summary_budget': 512, 'to': 2}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | VerdictResponse]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
body=body,
idempotency_key=idempotency_key,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    conversation: str,
    *,
    client: AuthenticatedClient,
    body: CompactionRequestBody,
    idempotency_key: str | Unset = UNSET,

) -> Problem | VerdictResponse | None:
    """ Propose a compaction

     Decides which turns of [from, to] the summary really covers and persists only that pointer set. A
    rejected verdict is 422 problem+json carrying the whole verdict, and persists nothing.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (CompactionRequestBody):  Example: {'end_marker': '</summary>', 'finish_reason':
            'stop', 'from': 0, 'summary': '<summary>Mia (user mia_li_3668) wants a flight from New
            York to Seattle on May 20th.</summary>', 'summary_budget': 512, 'to': 2}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | VerdictResponse
     """


    return sync_detailed(
        conversation=conversation,
client=client,
body=body,
idempotency_key=idempotency_key,

    ).parsed

async def asyncio_detailed(
    conversation: str,
    *,
    client: AuthenticatedClient,
    body: CompactionRequestBody,
    idempotency_key: str | Unset = UNSET,

) -> Response[Problem | VerdictResponse]:
    """ Propose a compaction

     Decides which turns of [from, to] the summary really covers and persists only that pointer set. A
    rejected verdict is 422 problem+json carrying the whole verdict, and persists nothing.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (CompactionRequestBody):  Example: {'end_marker': '</summary>', 'finish_reason':
            'stop', 'from': 0, 'summary': '<summary>Mia (user mia_li_3668) wants a flight from New
            York to Seattle on May 20th.</summary>', 'summary_budget': 512, 'to': 2}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | VerdictResponse]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
body=body,
idempotency_key=idempotency_key,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    conversation: str,
    *,
    client: AuthenticatedClient,
    body: CompactionRequestBody,
    idempotency_key: str | Unset = UNSET,

) -> Problem | VerdictResponse | None:
    """ Propose a compaction

     Decides which turns of [from, to] the summary really covers and persists only that pointer set. A
    rejected verdict is 422 problem+json carrying the whole verdict, and persists nothing.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (CompactionRequestBody):  Example: {'end_marker': '</summary>', 'finish_reason':
            'stop', 'from': 0, 'summary': '<summary>Mia (user mia_li_3668) wants a flight from New
            York to Seattle on May 20th.</summary>', 'summary_budget': 512, 'to': 2}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | VerdictResponse
     """


    return (await asyncio_detailed(
        conversation=conversation,
client=client,
body=body,
idempotency_key=idempotency_key,

    )).parsed
