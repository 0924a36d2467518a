from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from dateutil.parser import isoparse
from typing import cast
import datetime






T = TypeVar("T", bound="ConversationListItem")



@_attrs_define
class ConversationListItem:
    """ 
        Attributes:
            conversation (str):
            last_append_at (datetime.datetime): What retention measures the conversation's age by.
            turns (int): How many turns the log holds (the next id).
            latest_checkpoint_id (int | None | Unset):
     """

    conversation: str
    last_append_at: datetime.datetime
    turns: int
    latest_checkpoint_id: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        conversation = self.conversation

        last_append_at = self.last_append_at.isoformat()

        turns = self.turns

        latest_checkpoint_id: int | None | Unset
        if isinstance(self.latest_checkpoint_id, Unset):
            latest_checkpoint_id = UNSET
        else:
            latest_checkpoint_id = self.latest_checkpoint_id


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "conversation": conversation,
            "last_append_at": last_append_at,
            "turns": turns,
        })
        if latest_checkpoint_id is not UNSET:
            field_dict["latest_checkpoint_id"] = latest_checkpoint_id

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        conversation = d.pop("conversation")

        last_append_at = isoparse(d.pop("last_append_at"))




        turns = d.pop("turns")

        def _parse_latest_checkpoint_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        latest_checkpoint_id = _parse_latest_checkpoint_id(d.pop("latest_checkpoint_id", UNSET))


        conversation_list_item = cls(
            conversation=conversation,
            last_append_at=last_append_at,
            turns=turns,
            latest_checkpoint_id=latest_checkpoint_id,
        )


        conversation_list_item.additional_properties = d
        return conversation_list_item

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
