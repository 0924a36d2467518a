from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.outcome import Outcome






T = TypeVar("T", bound="CheckpointRef")



@_attrs_define
class CheckpointRef:
    """ 
        Attributes:
            advanced_to (int):
            checkpoint_id (int):
            from_ (int):
            outcome (Outcome):
     """

    advanced_to: int
    checkpoint_id: int
    from_: int
    outcome: Outcome
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        advanced_to = self.advanced_to

        checkpoint_id = self.checkpoint_id

        from_ = self.from_

        outcome = self.outcome.value


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "advanced_to": advanced_to,
            "checkpoint_id": checkpoint_id,
            "from": from_,
            "outcome": outcome,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        advanced_to = d.pop("advanced_to")

        checkpoint_id = d.pop("checkpoint_id")

        from_ = d.pop("from")

        outcome = Outcome(d.pop("outcome"))




        checkpoint_ref = cls(
            advanced_to=advanced_to,
            checkpoint_id=checkpoint_id,
            from_=from_,
            outcome=outcome,
        )


        checkpoint_ref.additional_properties = d
        return checkpoint_ref

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
