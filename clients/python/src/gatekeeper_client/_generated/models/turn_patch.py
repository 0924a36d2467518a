from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="TurnPatch")



@_attrs_define
class TurnPatch:
    """ `PATCH .../turns/{id}`: pin or unpin a turn.

        Example:
            {'pinned': False}

        Attributes:
            pinned (bool): `false` lets later summaries cover the turn; `true` keeps every later one from it.
     """

    pinned: bool





    def to_dict(self) -> dict[str, Any]:
        pinned = self.pinned


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "pinned": pinned,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        pinned = d.pop("pinned")

        turn_patch = cls(
            pinned=pinned,
        )

        return turn_patch

