from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.context_item_type_0_type import ContextItemType0Type
from typing import cast






T = TypeVar("T", bound="ContextItemType0")



@_attrs_define
class ContextItemType0:
    """ 
        Attributes:
            checkpoint_id (int):
            covers (list[list[int]]): Sorted, disjoint, inclusive id ranges.
            text (str):
            tokens (int):
            type_ (ContextItemType0Type):
     """

    checkpoint_id: int
    covers: list[list[int]]
    text: str
    tokens: int
    type_: ContextItemType0Type
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        checkpoint_id = self.checkpoint_id

        covers = []
        for componentsschemas_id_ranges_item_data in self.covers:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            covers.append(componentsschemas_id_ranges_item)



        text = self.text

        tokens = self.tokens

        type_ = self.type_.value


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "checkpoint_id": checkpoint_id,
            "covers": covers,
            "text": text,
            "tokens": tokens,
            "type": type_,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        checkpoint_id = d.pop("checkpoint_id")

        covers = []
        _covers = d.pop("covers")
        for componentsschemas_id_ranges_item_data in (_covers):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            covers.append(componentsschemas_id_ranges_item)


        text = d.pop("text")

        tokens = d.pop("tokens")

        type_ = ContextItemType0Type(d.pop("type"))




        context_item_type_0 = cls(
            checkpoint_id=checkpoint_id,
            covers=covers,
            text=text,
            tokens=tokens,
            type_=type_,
        )


        context_item_type_0.additional_properties = d
        return context_item_type_0

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
