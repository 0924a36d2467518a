from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.search_hit import SearchHit
  from ..models.search_term import SearchTerm





T = TypeVar("T", bound="SearchResponse")



@_attrs_define
class SearchResponse:
    """ Search hits over the raw log, best first, each with what `reconstruct` would answer for it.

        Example:
            {'complete': True, 'hits': [{'checkpoint_id': 1, 'conversation': 'airline-0-0', 'recall':
                '/v1/conversations/airline-0-0/reconstruct/7', 'role': 'tool', 'score': 7.62, 'snippet': {'matches': [{'end':
                25, 'start': 19, 'term': 'hat170'}], 'start': 0, 'text': '{"flight_number": "HAT170", "origin": "LGA"'},
                'source': 'raw_log', 'terms_in_summary': None, 'turn': 7}], 'ignored': [], 'query': 'HAT170', 'terms':
                [{'complete': True, 'term': 'hat170', 'turns': 1}]}

        Attributes:
            complete (bool): False when some term is held by more turns than a query ranks: the hits are the best of
                those it read, and a rarer term would find the rest.
            hits (list[SearchHit]):
            ignored (list[str]): Words of the query not searched, normalized: stop words, single characters, words
                longer than 64 characters, terms past the 16th.
            query (str):
            terms (list[SearchTerm]): The terms searched for: each run of words joined by identifier punctuation, normalized
                (stop words and single characters left out).
     """

    complete: bool
    hits: list[SearchHit]
    ignored: list[str]
    query: str
    terms: list[SearchTerm]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.search_hit import SearchHit
        from ..models.search_term import SearchTerm
        complete = self.complete

        hits = []
        for hits_item_data in self.hits:
            hits_item = hits_item_data.to_dict()
            hits.append(hits_item)



        ignored = self.ignored



        query = self.query

        terms = []
        for terms_item_data in self.terms:
            terms_item = terms_item_data.to_dict()
            terms.append(terms_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "complete": complete,
            "hits": hits,
            "ignored": ignored,
            "query": query,
            "terms": terms,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.search_hit import SearchHit
        from ..models.search_term import SearchTerm
        d = dict(src_dict)
        complete = d.pop("complete")

        hits = []
        _hits = d.pop("hits")
        for hits_item_data in (_hits):
            hits_item = SearchHit.from_dict(hits_item_data)



            hits.append(hits_item)


        ignored = cast(list[str], d.pop("ignored"))


        query = d.pop("query")

        terms = []
        _terms = d.pop("terms")
        for terms_item_data in (_terms):
            terms_item = SearchTerm.from_dict(terms_item_data)



            terms.append(terms_item)


        search_response = cls(
            complete=complete,
            hits=hits,
            ignored=ignored,
            query=query,
            terms=terms,
        )


        search_response.additional_properties = d
        return search_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
