from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="AnchorEvidence")



@_attrs_define
class AnchorEvidence:
    """ A derived anchor rule 2b checked for a turn, and how many turns of the range hold it (this
    one included): 1 is the turn's own.

        Attributes:
            anchor (str):
            turns_sharing (int):
     """

    anchor: str
    turns_sharing: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        anchor = self.anchor

        turns_sharing = self.turns_sharing


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "anchor": anchor,
            "turns_sharing": turns_sharing,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        anchor = d.pop("anchor")

        turns_sharing = d.pop("turns_sharing")

        anchor_evidence = cls(
            anchor=anchor,
            turns_sharing=turns_sharing,
        )


        anchor_evidence.additional_properties = d
        return anchor_evidence

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
