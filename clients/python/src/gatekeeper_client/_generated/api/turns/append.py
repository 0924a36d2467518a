from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.append_turns_request import AppendTurnsRequest
from ...models.append_turns_response import AppendTurnsResponse
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    conversation: str,
    *,
    body: AppendTurnsRequest,
    idempotency_key: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key



    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/conversations/{conversation}/turns".format(conversation=quote(str(conversation), safe=""),),
    }

    _kwargs["json"] = body.to_dict()


    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> AppendTurnsResponse | Problem | None:
    if response.status_code == 200:
        response_200 = AppendTurnsResponse.from_dict(response.json())



        return response_200

    if response.status_code == 201:
        response_201 = AppendTurnsResponse.from_dict(response.json())



        return response_201

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[AppendTurnsResponse | Problem]:
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
    body: AppendTurnsRequest,
    idempotency_key: str | Unset = UNSET,

) -> Response[AppendTurnsResponse | Problem]:
    """ Append raw turns

     Appends a batch, all or nothing. Ids are sequence numbers without gaps (omitted: assigned). A turn
    stored identically is an idempotent replay; the same id with anything different is 409 and nothing
    is written. Tokens and anchors are counted and derived when absent.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (AppendTurnsRequest):  Example: {'turns': [{'content': "Hi! I'm looking to book a
            flight from New York to Seattle on May 20th.", 'id': 0, 'role': 'user'}, {'content': "To
            assist you with booking a flight, I'll need your user ID. Could you please provide that?",
            'id': 1, 'role': 'assistant'}, {'content': 'Sure, my user ID is mia_li_3668.',
            'external_id': 'msg_03', 'id': 2, 'role': 'user'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppendTurnsResponse | Problem]
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
    body: AppendTurnsRequest,
    idempotency_key: str | Unset = UNSET,

) -> AppendTurnsResponse | Problem | None:
    """ Append raw turns

     Appends a batch, all or nothing. Ids are sequence numbers without gaps (omitted: assigned). A turn
    stored identically is an idempotent replay; the same id with anything different is 409 and nothing
    is written. Tokens and anchors are counted and derived when absent.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (AppendTurnsRequest):  Example: {'turns': [{'content': "Hi! I'm looking to book a
            flight from New York to Seattle on May 20th.", 'id': 0, 'role': 'user'}, {'content': "To
            assist you with booking a flight, I'll need your user ID. Could you please provide that?",
            'id': 1, 'role': 'assistant'}, {'content': 'Sure, my user ID is mia_li_3668.',
            'external_id': 'msg_03', 'id': 2, 'role': 'user'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppendTurnsResponse | Problem
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
    body: AppendTurnsRequest,
    idempotency_key: str | Unset = UNSET,

) -> Response[AppendTurnsResponse | Problem]:
    """ Append raw turns

     Appends a batch, all or nothing. Ids are sequence numbers without gaps (omitted: assigned). A turn
    stored identically is an idempotent replay; the same id with anything different is 409 and nothing
    is written. Tokens and anchors are counted and derived when absent.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (AppendTurnsRequest):  Example: {'turns': [{'content': "Hi! I'm looking to book a
            flight from New York to Seattle on May 20th.", 'id': 0, 'role': 'user'}, {'content': "To
            assist you with booking a flight, I'll need your user ID. Could you please provide that?",
            'id': 1, 'role': 'assistant'}, {'content': 'Sure, my user ID is mia_li_3668.',
            'external_id': 'msg_03', 'id': 2, 'role': 'user'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppendTurnsResponse | Problem]
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
    body: AppendTurnsRequest,
    idempotency_key: str | Unset = UNSET,

) -> AppendTurnsResponse | Problem | None:
    """ Append raw turns

     Appends a batch, all or nothing. Ids are sequence numbers without gaps (omitted: assigned). A turn
    stored identically is an idempotent replay; the same id with anything different is 409 and nothing
    is written. Tokens and anchors are counted and derived when absent.

    Args:
        conversation (str):
        idempotency_key (str | Unset):
        body (AppendTurnsRequest):  Example: {'turns': [{'content': "Hi! I'm looking to book a
            flight from New York to Seattle on May 20th.", 'id': 0, 'role': 'user'}, {'content': "To
            assist you with booking a flight, I'll need your user ID. Could you please provide that?",
            'id': 1, 'role': 'assistant'}, {'content': 'Sure, my user ID is mia_li_3668.',
            'external_id': 'msg_03', 'id': 2, 'role': 'user'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppendTurnsResponse | Problem
     """


    return (await asyncio_detailed(
        conversation=conversation,
client=client,
body=body,
idempotency_key=idempotency_key,

    )).parsed
