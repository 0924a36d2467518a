from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.turn_list_item import TurnListItem





T = TypeVar("T", bound="TurnListResponse")



@_attrs_define
class TurnListResponse:
    """ `GET .../turns`: a page of the log's turns, without their content: what it takes to draw
    the conversation to scale.

        Attributes:
            conversation (str):
            turns (list[TurnListItem]):
            next_from (int | None | Unset): Pass as `from` for the next page; absent when this page reaches the end of the
                log.
     """

    conversation: str
    turns: list[TurnListItem]
    next_from: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.turn_list_item import TurnListItem
        conversation = self.conversation

        turns = []
        for turns_item_data in self.turns:
            turns_item = turns_item_data.to_dict()
            turns.append(turns_item)



        next_from: int | None | Unset
        if isinstance(self.next_from, Unset):
            next_from = UNSET
        else:
            next_from = self.next_from


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "conversation": conversation,
            "turns": turns,
        })
        if next_from is not UNSET:
            field_dict["next_from"] = next_from

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.turn_list_item import TurnListItem
        d = dict(src_dict)
        conversation = d.pop("conversation")

        turns = []
        _turns = d.pop("turns")
        for turns_item_data in (_turns):
            turns_item = TurnListItem.from_dict(turns_item_data)



            turns.append(turns_item)


        def _parse_next_from(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        next_from = _parse_next_from(d.pop("next_from", UNSET))


        turn_list_response = cls(
            conversation=conversation,
            turns=turns,
            next_from=next_from,
        )


        turn_list_response.additional_properties = d
        return turn_list_response

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
