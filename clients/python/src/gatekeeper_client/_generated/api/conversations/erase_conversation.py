from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    conversation: str,

) -> dict[str, Any]:
    

    

    

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/conversations/{conversation}".format(conversation=quote(str(conversation), safe=""),),
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Any | Problem | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Any | Problem]:
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

) -> Response[Any | Problem]:
    """ Erase a conversation

     Deletes its turns, checkpoints, Idempotency-Key records, counts and search index entries in one
    transaction, at once (no grace period), after any write that holds its lock; every service process's
    reconstruct answers forget it. Afterwards every read of it is 404, and an append starts it again at
    id 0.

    Args:
        conversation (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
     """


    kwargs = _get_kwargs(
        conversation=conversation,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    conversation: str,
    *,
    client: AuthenticatedClient,

) -> Any | Problem | None:
    """ Erase a conversation

     Deletes its turns, checkpoints, Idempotency-Key records, counts and search index entries in one
    transaction, at once (no grace period), after any write that holds its lock; every service process's
    reconstruct answers forget it. Afterwards every read of it is 404, and an append starts it again at
    id 0.

    Args:
        conversation (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
     """


    return sync_detailed(
        conversation=conversation,
client=client,

    ).parsed

async def asyncio_detailed(
    conversation: str,
    *,
    client: AuthenticatedClient,

) -> Response[Any | Problem]:
    """ Erase a conversation

     Deletes its turns, checkpoints, Idempotency-Key records, counts and search index entries in one
    transaction, at once (no grace period), after any write that holds its lock; every service process's
    reconstruct answers forget it. Afterwards every read of it is 404, and an append starts it again at
    id 0.

    Args:
        conversation (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
     """


    kwargs = _get_kwargs(
        conversation=conversation,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    conversation: str,
    *,
    client: AuthenticatedClient,

) -> Any | Problem | None:
    """ Erase a conversation

     Deletes its turns, checkpoints, Idempotency-Key records, counts and search index entries in one
    transaction, at once (no grace period), after any write that holds its lock; every service process's
    reconstruct answers forget it. Afterwards every read of it is 404, and an append starts it again at
    id 0.

    Args:
        conversation (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
     """


    return (await asyncio_detailed(
        conversation=conversation,
client=client,

    )).parsed
