from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.anchor_origin import AnchorOrigin
from ..models.role import Role
from ..types import UNSET, Unset
from dateutil.parser import isoparse
from typing import cast
import datetime






T = TypeVar("T", bound="TurnResponse")



@_attrs_define
class TurnResponse:
    """ 
        Attributes:
            anchor_origin (AnchorOrigin): Who chose a turn's anchors.
            anchors (list[str]): The client's anchors, or the provisional derived ones.
            content (str):
            created_at (datetime.datetime):
            id (int):
            pinned (bool):
            role (Role):
            tokens (int):
            external_id (None | str | Unset):
     """

    anchor_origin: AnchorOrigin
    anchors: list[str]
    content: str
    created_at: datetime.datetime
    id: int
    pinned: bool
    role: Role
    tokens: int
    external_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        anchor_origin = self.anchor_origin.value

        anchors = self.anchors



        content = self.content

        created_at = self.created_at.isoformat()

        id = self.id

        pinned = self.pinned

        role = self.role.value

        tokens = self.tokens

        external_id: None | str | Unset
        if isinstance(self.external_id, Unset):
            external_id = UNSET
        else:
            external_id = self.external_id


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "anchor_origin": anchor_origin,
            "anchors": anchors,
            "content": content,
            "created_at": created_at,
            "id": id,
            "pinned": pinned,
            "role": role,
            "tokens": tokens,
        })
        if external_id is not UNSET:
            field_dict["external_id"] = external_id

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        anchor_origin = AnchorOrigin(d.pop("anchor_origin"))




        anchors = cast(list[str], d.pop("anchors"))


        content = d.pop("content")

        created_at = isoparse(d.pop("created_at"))




        id = d.pop("id")

        pinned = d.pop("pinned")

        role = Role(d.pop("role"))




        tokens = d.pop("tokens")

        def _parse_external_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        external_id = _parse_external_id(d.pop("external_id", UNSET))


        turn_response = cls(
            anchor_origin=anchor_origin,
            anchors=anchors,
            content=content,
            created_at=created_at,
            id=id,
            pinned=pinned,
            role=role,
            tokens=tokens,
            external_id=external_id,
        )


        turn_response.additional_properties = d
        return turn_response

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
