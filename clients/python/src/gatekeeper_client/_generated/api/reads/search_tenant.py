from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.search_response import SearchResponse
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    *,
    q: str,
    limit: int | Unset = UNSET,
    conversation_prefix: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(gatekeeper_min_position, Unset):
        headers["Gatekeeper-Min-Position"] = gatekeeper_min_position



    

    params: dict[str, Any] = {}

    params["q"] = q

    params["limit"] = limit

    params["conversation_prefix"] = conversation_prefix


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/search",
        "params": params,
    }


    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | SearchResponse | None:
    if response.status_code == 200:
        response_200 = SearchResponse.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | SearchResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    q: str,
    limit: int | Unset = UNSET,
    conversation_prefix: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[Problem | SearchResponse]:
    """ Search every conversation of the tenant

     Finds turns by the words, numbers and identifiers they hold, in their raw text, whatever summary
    stands for them: a turn an agent can no longer see is found here. Hits are ranked by BM25 (more and
    rarer terms, shorter turns first; ties to the newer turn), each with a snippet, the matched spans
    (character offsets) and `source`, what `reconstruct` answers for it: `summary` (with
    `terms_in_summary`: whether the summary kept the words searched for), `raw_log` or `live`; `recall`
    is the path that answers the turn. A query reads at most 1,000 turns a term: `complete: false` says
    a term was held by more, and a rarer one finds the rest. Words it does not search (stop words,
    single characters, terms past the 16th) are listed in `ignored`.

    Args:
        q (str):
        limit (int | Unset):
        conversation_prefix (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SearchResponse]
     """


    kwargs = _get_kwargs(
        q=q,
limit=limit,
conversation_prefix=conversation_prefix,
gatekeeper_min_position=gatekeeper_min_position,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    q: str,
    limit: int | Unset = UNSET,
    conversation_prefix: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Problem | SearchResponse | None:
    """ Search every conversation of the tenant

     Finds turns by the words, numbers and identifiers they hold, in their raw text, whatever summary
    stands for them: a turn an agent can no longer see is found here. Hits are ranked by BM25 (more and
    rarer terms, shorter turns first; ties to the newer turn), each with a snippet, the matched spans
    (character offsets) and `source`, what `reconstruct` answers for it: `summary` (with
    `terms_in_summary`: whether the summary kept the words searched for), `raw_log` or `live`; `recall`
    is the path that answers the turn. A query reads at most 1,000 turns a term: `complete: false` says
    a term was held by more, and a rarer one finds the rest. Words it does not search (stop words,
    single characters, terms past the 16th) are listed in `ignored`.

    Args:
        q (str):
        limit (int | Unset):
        conversation_prefix (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SearchResponse
     """


    return sync_detailed(
        client=client,
q=q,
limit=limit,
conversation_prefix=conversation_prefix,
gatekeeper_min_position=gatekeeper_min_position,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    q: str,
    limit: int | Unset = UNSET,
    conversation_prefix: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Response[Problem | SearchResponse]:
    """ Search every conversation of the tenant

     Finds turns by the words, numbers and identifiers they hold, in their raw text, whatever summary
    stands for them: a turn an agent can no longer see is found here. Hits are ranked by BM25 (more and
    rarer terms, shorter turns first; ties to the newer turn), each with a snippet, the matched spans
    (character offsets) and `source`, what `reconstruct` answers for it: `summary` (with
    `terms_in_summary`: whether the summary kept the words searched for), `raw_log` or `live`; `recall`
    is the path that answers the turn. A query reads at most 1,000 turns a term: `complete: false` says
    a term was held by more, and a rarer one finds the rest. Words it does not search (stop words,
    single characters, terms past the 16th) are listed in `ignored`.

    Args:
        q (str):
        limit (int | Unset):
        conversation_prefix (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SearchResponse]
     """


    kwargs = _get_kwargs(
        q=q,
limit=limit,
conversation_prefix=conversation_prefix,
gatekeeper_min_position=gatekeeper_min_position,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    q: str,
    limit: int | Unset = UNSET,
    conversation_prefix: str | Unset = UNSET,
    gatekeeper_min_position: str | Unset = UNSET,

) -> Problem | SearchResponse | None:
    """ Search every conversation of the tenant

     Finds turns by the words, numbers and identifiers they hold, in their raw text, whatever summary
    stands for them: a turn an agent can no longer see is found here. Hits are ranked by BM25 (more and
    rarer terms, shorter turns first; ties to the newer turn), each with a snippet, the matched spans
    (character offsets) and `source`, what `reconstruct` answers for it: `summary` (with
    `terms_in_summary`: whether the summary kept the words searched for), `raw_log` or `live`; `recall`
    is the path that answers the turn. A query reads at most 1,000 turns a term: `complete: false` says
    a term was held by more, and a rarer one finds the rest. Words it does not search (stop words,
    single characters, terms past the 16th) are listed in `ignored`.

    Args:
        q (str):
        limit (int | Unset):
        conversation_prefix (str | Unset):
        gatekeeper_min_position (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SearchResponse
     """


    return (await asyncio_detailed(
        client=client,
q=q,
limit=limit,
conversation_prefix=conversation_prefix,
gatekeeper_min_position=gatekeeper_min_position,

    )).parsed
