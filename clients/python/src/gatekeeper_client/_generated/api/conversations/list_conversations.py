from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.conversation_list_response import ConversationListResponse
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    *,
    limit: int | Unset = UNSET,
    prefix: str | Unset = UNSET,
    cursor: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(gatekeeper_min_position, Unset):
        headers["Gatekeeper-Min-Position"] = gatekeeper_min_position



    

    params: dict[str, Any] = {}

    params["limit"] = limit

    params["prefix"] = prefix

    params["cursor"] = cursor


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/conversations",
        "params": params,
    }


    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ConversationListResponse | Problem | None:
    if response.status_code == 200:
        response_200 = ConversationListResponse.from_dict(response.json())



        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[ConversationListResponse | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    prefix: str | Unset = UNSET,
    cursor: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[ConversationListResponse | Problem]:
    """ List the tenant's conversations, in name order, a page at a time

    Args:
        limit (int | Unset):
        prefix (str | Unset):
        cursor (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ConversationListResponse | Problem]
     """


    kwargs = _get_kwargs(
        limit=limit,
prefix=prefix,
cursor=cursor,
gatekeeper_min_position=gatekeeper_min_position,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    prefix: str | Unset = UNSET,
    cursor: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> ConversationListResponse | Problem | None:
    """ List the tenant's conversations, in name order, a page at a time

    Args:
        limit (int | Unset):
        prefix (str | Unset):
        cursor (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ConversationListResponse | Problem
     """


    return sync_detailed(
        client=client,
limit=limit,
prefix=prefix,
cursor=cursor,
gatekeeper_min_position=gatekeeper_min_position,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    prefix: str | Unset = UNSET,
    cursor: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[ConversationListResponse | Problem]:
    """ List the tenant's conversations, in name order, a page at a time

    Args:
        limit (int | Unset):
        prefix (str | Unset):
        cursor (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ConversationListResponse | Problem]
     """


    kwargs = _get_kwargs(
        limit=limit,
prefix=prefix,
cursor=cursor,
gatekeeper_min_position=gatekeeper_min_position,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    prefix: str | Unset = UNSET,
    cursor: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> ConversationListResponse | Problem | None:
    """ List the tenant's conversations, in name order, a page at a time

    Args:
        limit (int | Unset):
        prefix (str | Unset):
        cursor (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ConversationListResponse | Problem
     """


    return (await asyncio_detailed(
        client=client,
limit=limit,
prefix=prefix,
cursor=cursor,
gatekeeper_min_position=gatekeeper_min_position,

    )).parsed
