from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.appended_turn import AppendedTurn





T = TypeVar("T", bound="AppendTurnsResponse")



@_attrs_define
class AppendTurnsResponse:
    """ 
        Example:
            {'appended': 3, 'conversation': 'airline-0-0', 'next_id': 3, 'replayed': 0, 'turns': [{'anchors': ['Seattle',
                'York', 'New'], 'id': 0, 'tokens': 19}, {'anchors': [], 'id': 1, 'tokens': 20}, {'anchors': ['mia_li_3668'],
                'id': 2, 'tokens': 12}]}

        Attributes:
            appended (int):
            conversation (str):
            next_id (int):
            replayed (int):
            turns (list[AppendedTurn]):
     """

    appended: int
    conversation: str
    next_id: int
    replayed: int
    turns: list[AppendedTurn]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.appended_turn import AppendedTurn
        appended = self.appended

        conversation = self.conversation

        next_id = self.next_id

        replayed = self.replayed

        turns = []
        for turns_item_data in self.turns:
            turns_item = turns_item_data.to_dict()
            turns.append(turns_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "appended": appended,
            "conversation": conversation,
            "next_id": next_id,
            "replayed": replayed,
            "turns": turns,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.appended_turn import AppendedTurn
        d = dict(src_dict)
        appended = d.pop("appended")

        conversation = d.pop("conversation")

        next_id = d.pop("next_id")

        replayed = d.pop("replayed")

        turns = []
        _turns = d.pop("turns")
        for turns_item_data in (_turns):
            turns_item = AppendedTurn.from_dict(turns_item_data)



            turns.append(turns_item)


        append_turns_response = cls(
            appended=appended,
            conversation=conversation,
            next_id=next_id,
            replayed=replayed,
            turns=turns,
        )


        append_turns_response.additional_properties = d
        return append_turns_response

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
