from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.turn_list_response import TurnListResponse
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    conversation: str,
    *,
    from_: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(gatekeeper_min_position, Unset):
        headers["Gatekeeper-Min-Position"] = gatekeeper_min_position



    

    params: dict[str, Any] = {}

    params["from"] = from_

    params["limit"] = limit


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/conversations/{conversation}/turns".format(conversation=quote(str(conversation), safe=""),),
        "params": params,
    }


    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | TurnListResponse | None:
    if response.status_code == 200:
        response_200 = TurnListResponse.from_dict(response.json())



        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | TurnListResponse]:
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
    from_: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[Problem | TurnListResponse]:
    """ List the log's turns without their content, a page at a time

     Each turn's id, role, tokens and whether it is pinned, in id order: what it takes to draw a
    conversation to scale (the coverage map reads it). Read the content with `GET .../turns/{id}`.

    Args:
        conversation (str):
        from_ (int | Unset):
        limit (int | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TurnListResponse]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
from_=from_,
limit=limit,
gatekeeper_min_position=gatekeeper_min_position,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    conversation: str,
    *,
    client: AuthenticatedClient,
    from_: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Problem | TurnListResponse | None:
    """ List the log's turns without their content, a page at a time

     Each turn's id, role, tokens and whether it is pinned, in id order: what it takes to draw a
    conversation to scale (the coverage map reads it). Read the content with `GET .../turns/{id}`.

    Args:
        conversation (str):
        from_ (int | Unset):
        limit (int | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TurnListResponse
     """


    return sync_detailed(
        conversation=conversation,
client=client,
from_=from_,
limit=limit,
gatekeeper_min_position=gatekeeper_min_position,

    ).parsed

async def asyncio_detailed(
    conversation: str,
    *,
    client: AuthenticatedClient,
    from_: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[Problem | TurnListResponse]:
    """ List the log's turns without their content, a page at a time

     Each turn's id, role, tokens and whether it is pinned, in id order: what it takes to draw a
    conversation to scale (the coverage map reads it). Read the content with `GET .../turns/{id}`.

    Args:
        conversation (str):
        from_ (int | Unset):
        limit (int | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TurnListResponse]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
from_=from_,
limit=limit,
gatekeeper_min_position=gatekeeper_min_position,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    conversation: str,
    *,
    client: AuthenticatedClient,
    from_: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Problem | TurnListResponse | None:
    """ List the log's turns without their content, a page at a time

     Each turn's id, role, tokens and whether it is pinned, in id order: what it takes to draw a
    conversation to scale (the coverage map reads it). Read the content with `GET .../turns/{id}`.

    Args:
        conversation (str):
        from_ (int | Unset):
        limit (int | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TurnListResponse
     """


    return (await asyncio_detailed(
        conversation=conversation,
client=client,
from_=from_,
limit=limit,
gatekeeper_min_position=gatekeeper_min_position,

    )).parsed
