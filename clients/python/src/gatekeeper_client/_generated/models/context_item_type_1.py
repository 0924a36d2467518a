from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.context_item_type_1_type import ContextItemType1Type
from ..models.role import Role
from ..models.source import Source






T = TypeVar("T", bound="ContextItemType1")



@_attrs_define
class ContextItemType1:
    """ 
        Attributes:
            content (str):
            id (int):
            role (Role):
            source (Source):
            tokens (int):
            type_ (ContextItemType1Type):
     """

    content: str
    id: int
    role: Role
    source: Source
    tokens: int
    type_: ContextItemType1Type
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        content = self.content

        id = self.id

        role = self.role.value

        source = self.source.value

        tokens = self.tokens

        type_ = self.type_.value


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "content": content,
            "id": id,
            "role": role,
            "source": source,
            "tokens": tokens,
            "type": type_,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        content = d.pop("content")

        id = d.pop("id")

        role = Role(d.pop("role"))




        source = Source(d.pop("source"))




        tokens = d.pop("tokens")

        type_ = ContextItemType1Type(d.pop("type"))




        context_item_type_1 = cls(
            content=content,
            id=id,
            role=role,
            source=source,
            tokens=tokens,
            type_=type_,
        )


        context_item_type_1.additional_properties = d
        return context_item_type_1

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
