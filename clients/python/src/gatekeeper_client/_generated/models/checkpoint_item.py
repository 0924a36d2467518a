from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.outcome import Outcome
from dateutil.parser import isoparse
from typing import cast
import datetime






T = TypeVar("T", bound="CheckpointItem")



@_attrs_define
class CheckpointItem:
    """ 
        Attributes:
            advanced_to (int):
            checkpoint_id (int):
            covered (list[list[int]]): Sorted, disjoint, inclusive id ranges.
            created_at (datetime.datetime):
            from_ (int):
            not_compacted (list[list[int]]): Sorted, disjoint, inclusive id ranges.
            outcome (Outcome):
            summary_tokens (int):
            to (int):
            uncovered (list[list[int]]): Sorted, disjoint, inclusive id ranges.
     """

    advanced_to: int
    checkpoint_id: int
    covered: list[list[int]]
    created_at: datetime.datetime
    from_: int
    not_compacted: list[list[int]]
    outcome: Outcome
    summary_tokens: int
    to: int
    uncovered: list[list[int]]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        advanced_to = self.advanced_to

        checkpoint_id = self.checkpoint_id

        covered = []
        for componentsschemas_id_ranges_item_data in self.covered:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            covered.append(componentsschemas_id_ranges_item)



        created_at = self.created_at.isoformat()

        from_ = self.from_

        not_compacted = []
        for componentsschemas_id_ranges_item_data in self.not_compacted:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            not_compacted.append(componentsschemas_id_ranges_item)



        outcome = self.outcome.value

        summary_tokens = self.summary_tokens

        to = self.to

        uncovered = []
        for componentsschemas_id_ranges_item_data in self.uncovered:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            uncovered.append(componentsschemas_id_ranges_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "advanced_to": advanced_to,
            "checkpoint_id": checkpoint_id,
            "covered": covered,
            "created_at": created_at,
            "from": from_,
            "not_compacted": not_compacted,
            "outcome": outcome,
            "summary_tokens": summary_tokens,
            "to": to,
            "uncovered": uncovered,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        advanced_to = d.pop("advanced_to")

        checkpoint_id = d.pop("checkpoint_id")

        covered = []
        _covered = d.pop("covered")
        for componentsschemas_id_ranges_item_data in (_covered):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            covered.append(componentsschemas_id_ranges_item)


        created_at = isoparse(d.pop("created_at"))




        from_ = d.pop("from")

        not_compacted = []
        _not_compacted = d.pop("not_compacted")
        for componentsschemas_id_ranges_item_data in (_not_compacted):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            not_compacted.append(componentsschemas_id_ranges_item)


        outcome = Outcome(d.pop("outcome"))




        summary_tokens = d.pop("summary_tokens")

        to = d.pop("to")

        uncovered = []
        _uncovered = d.pop("uncovered")
        for componentsschemas_id_ranges_item_data in (_uncovered):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            uncovered.append(componentsschemas_id_ranges_item)


        checkpoint_item = cls(
            advanced_to=advanced_to,
            checkpoint_id=checkpoint_id,
            covered=covered,
            created_at=created_at,
            from_=from_,
            not_compacted=not_compacted,
            outcome=outcome,
            summary_tokens=summary_tokens,
            to=to,
            uncovered=uncovered,
        )


        checkpoint_item.additional_properties = d
        return checkpoint_item

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
