from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.search_match import SearchMatch





T = TypeVar("T", bound="SearchSnippet")



@_attrs_define
class SearchSnippet:
    """ Where the matched terms stand in the turn's text: offsets count characters, as evidence
    offsets do.

        Attributes:
            matches (list[SearchMatch]): Each matched term's first occurrence inside `text`.
            start (int): Where `text` starts in the turn's text.
            text (str): Up to 240 characters of the turn's text around its first match.
     """

    matches: list[SearchMatch]
    start: int
    text: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.search_match import SearchMatch
        matches = []
        for matches_item_data in self.matches:
            matches_item = matches_item_data.to_dict()
            matches.append(matches_item)



        start = self.start

        text = self.text


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "matches": matches,
            "start": start,
            "text": text,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.search_match import SearchMatch
        d = dict(src_dict)
        matches = []
        _matches = d.pop("matches")
        for matches_item_data in (_matches):
            matches_item = SearchMatch.from_dict(matches_item_data)



            matches.append(matches_item)


        start = d.pop("start")

        text = d.pop("text")

        search_snippet = cls(
            matches=matches,
            start=start,
            text=text,
        )


        search_snippet.additional_properties = d
        return search_snippet

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
