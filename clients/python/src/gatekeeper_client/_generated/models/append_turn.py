from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.role import Role
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="AppendTurn")



@_attrs_define
class AppendTurn:
    """ 
        Attributes:
            content (str):
            role (Role):
            anchors (list[str] | None | Unset): Omitted, the service derives them from the content. At most
                `GATEKEEPER_MAX_ANCHORS_PER_TURN` (default 64).
            external_id (None | str | Unset):
            id (int | None | Unset): The turn's sequence number; omitted, the service assigns the next one.
            pinned (bool | Unset): A pending tool call, a standing instruction, a user constraint: a pinned turn is never
                covered by any summary, so it is always answered from the raw log and kept verbatim in
                the working context. Unpin it with `PATCH .../turns/{id}`.
            tokens (int | None | Unset): Omitted, the service counts them with its tokenizer.
     """

    content: str
    role: Role
    anchors: list[str] | None | Unset = UNSET
    external_id: None | str | Unset = UNSET
    id: int | None | Unset = UNSET
    pinned: bool | Unset = UNSET
    tokens: int | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        content = self.content

        role = self.role.value

        anchors: list[str] | None | Unset
        if isinstance(self.anchors, Unset):
            anchors = UNSET
        elif isinstance(self.anchors, list):
            anchors = self.anchors


        else:
            anchors = self.anchors

        external_id: None | str | Unset
        if isinstance(self.external_id, Unset):
            external_id = UNSET
        else:
            external_id = self.external_id

        id: int | None | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        else:
            id = self.id

        pinned = self.pinned

        tokens: int | None | Unset
        if isinstance(self.tokens, Unset):
            tokens = UNSET
        else:
            tokens = self.tokens


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "content": content,
            "role": role,
        })
        if anchors is not UNSET:
            field_dict["anchors"] = anchors
        if external_id is not UNSET:
            field_dict["external_id"] = external_id
        if id is not UNSET:
            field_dict["id"] = id
        if pinned is not UNSET:
            field_dict["pinned"] = pinned
        if tokens is not UNSET:
            field_dict["tokens"] = tokens

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        content = d.pop("content")

        role = Role(d.pop("role"))




        def _parse_anchors(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                anchors_type_0 = cast(list[str], data)

                return anchors_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        anchors = _parse_anchors(d.pop("anchors", UNSET))


        def _parse_external_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        external_id = _parse_external_id(d.pop("external_id", UNSET))


        def _parse_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        id = _parse_id(d.pop("id", UNSET))


        pinned = d.pop("pinned", UNSET)

        def _parse_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        tokens = _parse_tokens(d.pop("tokens", UNSET))


        append_turn = cls(
            content=content,
            role=role,
            anchors=anchors,
            external_id=external_id,
            id=id,
            pinned=pinned,
            tokens=tokens,
        )

        return append_turn

