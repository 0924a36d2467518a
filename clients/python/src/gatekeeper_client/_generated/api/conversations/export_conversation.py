from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    conversation: str,
    *,
    gatekeeper_min_position: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(gatekeeper_min_position, Unset):
        headers["Gatekeeper-Min-Position"] = gatekeeper_min_position



    

    

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/conversations/{conversation}/export".format(conversation=quote(str(conversation), safe=""),),
    }


    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | None:
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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem]:
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
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[Problem]:
    """ Export a conversation as NDJSON

     A header line (`type: conversation`), then every turn in id order (with its term profile), then
    every checkpoint in id order (summary, verdict with every turn's detail, the candidates used): what
    existed when the export began, streamed a page at a time. `POST .../import` restores it exactly. If
    the conversation is erased meanwhile, the stream stops short of the counts its header announced.

    Args:
        conversation (str):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
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
    gatekeeper_min_position: str | Unset = UNSET,

) -> Problem | None:
    """ Export a conversation as NDJSON

     A header line (`type: conversation`), then every turn in id order (with its term profile), then
    every checkpoint in id order (summary, verdict with every turn's detail, the candidates used): what
    existed when the export began, streamed a page at a time. `POST .../import` restores it exactly. If
    the conversation is erased meanwhile, the stream stops short of the counts its header announced.

    Args:
        conversation (str):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem
     """


    return sync_detailed(
        conversation=conversation,
client=client,
gatekeeper_min_position=gatekeeper_min_position,

    ).parsed

async def asyncio_detailed(
    conversation: str,
    *,
    client: AuthenticatedClient,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[Problem]:
    """ Export a conversation as NDJSON

     A header line (`type: conversation`), then every turn in id order (with its term profile), then
    every checkpoint in id order (summary, verdict with every turn's detail, the candidates used): what
    existed when the export began, streamed a page at a time. `POST .../import` restores it exactly. If
    the conversation is erased meanwhile, the stream stops short of the counts its header announced.

    Args:
        conversation (str):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
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
    gatekeeper_min_position: str | Unset = UNSET,

) -> Problem | None:
    """ Export a conversation as NDJSON

     A header line (`type: conversation`), then every turn in id order (with its term profile), then
    every checkpoint in id order (summary, verdict with every turn's detail, the candidates used): what
    existed when the export began, streamed a page at a time. `POST .../import` restores it exactly. If
    the conversation is erased meanwhile, the stream stops short of the counts its header announced.

    Args:
        conversation (str):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem
     """


    return (await asyncio_detailed(
        conversation=conversation,
client=client,
gatekeeper_min_position=gatekeeper_min_position,

    )).parsed
