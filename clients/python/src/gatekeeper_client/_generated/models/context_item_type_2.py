from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.context_item_type_2_type import ContextItemType2Type
from ..models.role import Role
from typing import cast






T = TypeVar("T", bound="ContextItemType2")



@_attrs_define
class ContextItemType2:
    """ A turn no summary covers, left out of a budgeted context: it exists, this is how big it
    is, and `recall` answers it byte-exact.

        Attributes:
            anchors (list[str]): The turn's anchors, to search or ask for it by.
            id (int):
            preview (str): The turn's first characters (at most 160).
            recall (str): The reconstruct path that answers it.
            role (Role):
            stub_tokens (int): What this stub takes in the context (counted in `total_tokens`).
            tokens (int): The turn's own tokens: what recalling it brings back.
            type_ (ContextItemType2Type):
     """

    anchors: list[str]
    id: int
    preview: str
    recall: str
    role: Role
    stub_tokens: int
    tokens: int
    type_: ContextItemType2Type
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        anchors = self.anchors



        id = self.id

        preview = self.preview

        recall = self.recall

        role = self.role.value

        stub_tokens = self.stub_tokens

        tokens = self.tokens

        type_ = self.type_.value


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "anchors": anchors,
            "id": id,
            "preview": preview,
            "recall": recall,
            "role": role,
            "stub_tokens": stub_tokens,
            "tokens": tokens,
            "type": type_,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        anchors = cast(list[str], d.pop("anchors"))


        id = d.pop("id")

        preview = d.pop("preview")

        recall = d.pop("recall")

        role = Role(d.pop("role"))




        stub_tokens = d.pop("stub_tokens")

        tokens = d.pop("tokens")

        type_ = ContextItemType2Type(d.pop("type"))




        context_item_type_2 = cls(
            anchors=anchors,
            id=id,
            preview=preview,
            recall=recall,
            role=role,
            stub_tokens=stub_tokens,
            tokens=tokens,
            type_=type_,
        )


        context_item_type_2.additional_properties = d
        return context_item_type_2

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
