from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast






T = TypeVar("T", bound="AppendedTurn")



@_attrs_define
class AppendedTurn:
    """ 
        Attributes:
            anchors (list[str]): The anchors the client sent, or the provisional derived ones: what is rarest in the turn
                so far. The decision checks derived anchors per range (rule 2b), so ask
                `compaction-plan` for the ones a given range needs.
            id (int):
            tokens (int):
     """

    anchors: list[str]
    id: int
    tokens: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        anchors = self.anchors



        id = self.id

        tokens = self.tokens


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "anchors": anchors,
            "id": id,
            "tokens": tokens,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        anchors = cast(list[str], d.pop("anchors"))


        id = d.pop("id")

        tokens = d.pop("tokens")

        appended_turn = cls(
            anchors=anchors,
            id=id,
            tokens=tokens,
        )


        appended_turn.additional_properties = d
        return appended_turn

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
