from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.checkpoint_item import CheckpointItem





T = TypeVar("T", bound="CheckpointListResponse")



@_attrs_define
class CheckpointListResponse:
    """ 
        Attributes:
            checkpoints (list[CheckpointItem]):
            conversation (str):
            next_cursor (int | None | Unset): Pass as `cursor` for the next, older page; absent when this page is the last.
     """

    checkpoints: list[CheckpointItem]
    conversation: str
    next_cursor: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.checkpoint_item import CheckpointItem
        checkpoints = []
        for checkpoints_item_data in self.checkpoints:
            checkpoints_item = checkpoints_item_data.to_dict()
            checkpoints.append(checkpoints_item)



        conversation = self.conversation

        next_cursor: int | None | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "checkpoints": checkpoints,
            "conversation": conversation,
        })
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.checkpoint_item import CheckpointItem
        d = dict(src_dict)
        checkpoints = []
        _checkpoints = d.pop("checkpoints")
        for checkpoints_item_data in (_checkpoints):
            checkpoints_item = CheckpointItem.from_dict(checkpoints_item_data)



            checkpoints.append(checkpoints_item)


        conversation = d.pop("conversation")

        def _parse_next_cursor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))


        checkpoint_list_response = cls(
            checkpoints=checkpoints,
            conversation=conversation,
            next_cursor=next_cursor,
        )


        checkpoint_list_response.additional_properties = d
        return checkpoint_list_response

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
