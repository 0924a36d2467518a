from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.append_turn import AppendTurn





T = TypeVar("T", bound="AppendTurnsRequest")



@_attrs_define
class AppendTurnsRequest:
    """ 
        Example:
            {'turns': [{'content': "Hi! I'm looking to book a flight from New York to Seattle on May 20th.", 'id': 0,
                'role': 'user'}, {'content': "To assist you with booking a flight, I'll need your user ID. Could you please
                provide that?", 'id': 1, 'role': 'assistant'}, {'content': 'Sure, my user ID is mia_li_3668.', 'external_id':
                'msg_03', 'id': 2, 'role': 'user'}]}

        Attributes:
            turns (list[AppendTurn]): At most `GATEKEEPER_MAX_BATCH_TURNS` (default 10,000).
     """

    turns: list[AppendTurn]





    def to_dict(self) -> dict[str, Any]:
        from ..models.append_turn import AppendTurn
        turns = []
        for turns_item_data in self.turns:
            turns_item = turns_item_data.to_dict()
            turns.append(turns_item)




        field_dict: dict[str, Any] = {}

        field_dict.update({
            "turns": turns,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.append_turn import AppendTurn
        d = dict(src_dict)
        turns = []
        _turns = d.pop("turns")
        for turns_item_data in (_turns):
            turns_item = AppendTurn.from_dict(turns_item_data)



            turns.append(turns_item)


        append_turns_request = cls(
            turns=turns,
        )

        return append_turns_request

