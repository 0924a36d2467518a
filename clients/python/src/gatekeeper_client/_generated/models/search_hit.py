from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.role import Role
from ..models.source import Source
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.search_snippet import SearchSnippet





T = TypeVar("T", bound="SearchHit")



@_attrs_define
class SearchHit:
    """ 
        Attributes:
            conversation (str):
            recall (str): The path whose answer is this turn (`reconstruct`); `GET .../turns/{turn}` gives it raw.
            role (Role):
            score (float): BM25 over the turns found (higher is better); comparable within one answer only.
            snippet (SearchSnippet): Where the matched terms stand in the turn's text: offsets count characters, as evidence
                offsets do.
            source (Source):
            turn (int):
            checkpoint_id (int | None | Unset): The checkpoint that decides the turn, unless it is live.
            terms_in_summary (bool | None | Unset): With `source: summary` only: whether every matched term is in that
                summary too. False
                means the summary stands for the turn without the words searched for: recall the turn.
     """

    conversation: str
    recall: str
    role: Role
    score: float
    snippet: SearchSnippet
    source: Source
    turn: int
    checkpoint_id: int | None | Unset = UNSET
    terms_in_summary: bool | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.search_snippet import SearchSnippet
        conversation = self.conversation

        recall = self.recall

        role = self.role.value

        score = self.score

        snippet = self.snippet.to_dict()

        source = self.source.value

        turn = self.turn

        checkpoint_id: int | None | Unset
        if isinstance(self.checkpoint_id, Unset):
            checkpoint_id = UNSET
        else:
            checkpoint_id = self.checkpoint_id

        terms_in_summary: bool | None | Unset
        if isinstance(self.terms_in_summary, Unset):
            terms_in_summary = UNSET
        else:
            terms_in_summary = self.terms_in_summary


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "conversation": conversation,
            "recall": recall,
            "role": role,
            "score": score,
            "snippet": snippet,
            "source": source,
            "turn": turn,
        })
        if checkpoint_id is not UNSET:
            field_dict["checkpoint_id"] = checkpoint_id
        if terms_in_summary is not UNSET:
            field_dict["terms_in_summary"] = terms_in_summary

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.search_snippet import SearchSnippet
        d = dict(src_dict)
        conversation = d.pop("conversation")

        recall = d.pop("recall")

        role = Role(d.pop("role"))




        score = d.pop("score")

        snippet = SearchSnippet.from_dict(d.pop("snippet"))




        source = Source(d.pop("source"))




        turn = d.pop("turn")

        def _parse_checkpoint_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        checkpoint_id = _parse_checkpoint_id(d.pop("checkpoint_id", UNSET))


        def _parse_terms_in_summary(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        terms_in_summary = _parse_terms_in_summary(d.pop("terms_in_summary", UNSET))


        search_hit = cls(
            conversation=conversation,
            recall=recall,
            role=role,
            score=score,
            snippet=snippet,
            source=source,
            turn=turn,
            checkpoint_id=checkpoint_id,
            terms_in_summary=terms_in_summary,
        )


        search_hit.additional_properties = d
        return search_hit

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
