from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.turn_patch import TurnPatch
from ...models.turn_response import TurnResponse
from typing import cast



def _get_kwargs(
    conversation: str,
    id: int,
    *,
    body: TurnPatch,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/v1/conversations/{conversation}/turns/{id}".format(conversation=quote(str(conversation), safe=""),id=quote(str(id), safe=""),),
    }

    _kwargs["json"] = body.to_dict()


    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | TurnResponse | None:
    if response.status_code == 200:
        response_200 = TurnResponse.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | TurnResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    conversation: str,
    id: int,
    *,
    client: AuthenticatedClient,
    body: TurnPatch,

) -> Response[Problem | TurnResponse]:
    """ Pin or unpin a turn

     A pinned turn is never covered by a summary: every later verdict lists it uncovered with reason
    `pinned`, reconstruct answers it from the raw log, and the working context carries it verbatim.
    Unpinning lets later summaries cover it (checkpoints already made stay as they are). A turn that a
    checkpoint already covers cannot be pinned: 409.

    Args:
        conversation (str):
        id (int):
        body (TurnPatch): `PATCH .../turns/{id}`: pin or unpin a turn. Example: {'pinned': False}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TurnResponse]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
id=id,
body=body,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    conversation: str,
    id: int,
    *,
    client: AuthenticatedClient,
    body: TurnPatch,

) -> Problem | TurnResponse | None:
    """ Pin or unpin a turn

     A pinned turn is never covered by a summary: every later verdict lists it uncovered with reason
    `pinned`, reconstruct answers it from the raw log, and the working context carries it verbatim.
    Unpinning lets later summaries cover it (checkpoints already made stay as they are). A turn that a
    checkpoint already covers cannot be pinned: 409.

    Args:
        conversation (str):
        id (int):
        body (TurnPatch): `PATCH .../turns/{id}`: pin or unpin a turn. Example: {'pinned': False}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TurnResponse
     """


    return sync_detailed(
        conversation=conversation,
id=id,
client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    conversation: str,
    id: int,
    *,
    client: AuthenticatedClient,
    body: TurnPatch,

) -> Response[Problem | TurnResponse]:
    """ Pin or unpin a turn

     A pinned turn is never covered by a summary: every later verdict lists it uncovered with reason
    `pinned`, reconstruct answers it from the raw log, and the working context carries it verbatim.
    Unpinning lets later summaries cover it (checkpoints already made stay as they are). A turn that a
    checkpoint already covers cannot be pinned: 409.

    Args:
        conversation (str):
        id (int):
        body (TurnPatch): `PATCH .../turns/{id}`: pin or unpin a turn. Example: {'pinned': False}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TurnResponse]
     """


    kwargs = _get_kwargs(
        conversation=conversation,
id=id,
body=body,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    conversation: str,
    id: int,
    *,
    client: AuthenticatedClient,
    body: TurnPatch,

) -> Problem | TurnResponse | None:
    """ Pin or unpin a turn

     A pinned turn is never covered by a summary: every later verdict lists it uncovered with reason
    `pinned`, reconstruct answers it from the raw log, and the working context carries it verbatim.
    Unpinning lets later summaries cover it (checkpoints already made stay as they are). A turn that a
    checkpoint already covers cannot be pinned: 409.

    Args:
        conversation (str):
        id (int):
        body (TurnPatch): `PATCH .../turns/{id}`: pin or unpin a turn. Example: {'pinned': False}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TurnResponse
     """


    return (await asyncio_detailed(
        conversation=conversation,
id=id,
client=client,
body=body,

    )).parsed
