from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.coverage_path import CoveragePath
from ..models.mode import Mode
from ..models.outcome import Outcome
from ..models.rejection import Rejection
from ..models.truncation_signal import TruncationSignal
from ..types import UNSET, Unset
from dateutil.parser import isoparse
from typing import cast
import datetime

if TYPE_CHECKING:
  from ..models.turn_detail import TurnDetail





T = TypeVar("T", bound="CheckpointResponse")



@_attrs_define
class CheckpointResponse:
    """ 
        Attributes:
            contradictions (list[list[int]]): Sorted, disjoint, inclusive id ranges.
            coverage_path (CoveragePath):
            covered (list[list[int]]): Sorted, disjoint, inclusive id ranges.
            from_ (int):
            mode (Mode):
            not_compacted (list[list[int]]): Sorted, disjoint, inclusive id ranges.
            outcome (Outcome):
            over_ceiling (bool):
            prefix_tokens (int):
            required_budget (int):
            summary_budget (int):
            summary_tokens (int):
            to (int):
            truncated (bool):
            truncation_signals (list[TruncationSignal]):
            turns (list[TurnDetail]): Only the turns that are not covered.
            uncovered (list[list[int]]): Sorted, disjoint, inclusive id ranges.
            checkpoint_id (int):
            conversation (str):
            created_at (datetime.datetime):
            summary (str):
            advanced_to (int | None | Unset): Last turn the checkpoint advances over; `None` when it cannot advance at all.
            rejection (None | Rejection | Unset):
     """

    contradictions: list[list[int]]
    coverage_path: CoveragePath
    covered: list[list[int]]
    from_: int
    mode: Mode
    not_compacted: list[list[int]]
    outcome: Outcome
    over_ceiling: bool
    prefix_tokens: int
    required_budget: int
    summary_budget: int
    summary_tokens: int
    to: int
    truncated: bool
    truncation_signals: list[TruncationSignal]
    turns: list[TurnDetail]
    uncovered: list[list[int]]
    checkpoint_id: int
    conversation: str
    created_at: datetime.datetime
    summary: str
    advanced_to: int | None | Unset = UNSET
    rejection: None | Rejection | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.turn_detail import TurnDetail
        contradictions = []
        for componentsschemas_id_ranges_item_data in self.contradictions:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            contradictions.append(componentsschemas_id_ranges_item)



        coverage_path = self.coverage_path.value

        covered = []
        for componentsschemas_id_ranges_item_data in self.covered:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            covered.append(componentsschemas_id_ranges_item)



        from_ = self.from_

        mode = self.mode.value

        not_compacted = []
        for componentsschemas_id_ranges_item_data in self.not_compacted:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            not_compacted.append(componentsschemas_id_ranges_item)



        outcome = self.outcome.value

        over_ceiling = self.over_ceiling

        prefix_tokens = self.prefix_tokens

        required_budget = self.required_budget

        summary_budget = self.summary_budget

        summary_tokens = self.summary_tokens

        to = self.to

        truncated = self.truncated

        truncation_signals = []
        for truncation_signals_item_data in self.truncation_signals:
            truncation_signals_item = truncation_signals_item_data.value
            truncation_signals.append(truncation_signals_item)



        turns = []
        for turns_item_data in self.turns:
            turns_item = turns_item_data.to_dict()
            turns.append(turns_item)



        uncovered = []
        for componentsschemas_id_ranges_item_data in self.uncovered:
            componentsschemas_id_ranges_item = componentsschemas_id_ranges_item_data


            uncovered.append(componentsschemas_id_ranges_item)



        checkpoint_id = self.checkpoint_id

        conversation = self.conversation

        created_at = self.created_at.isoformat()

        summary = self.summary

        advanced_to: int | None | Unset
        if isinstance(self.advanced_to, Unset):
            advanced_to = UNSET
        else:
            advanced_to = self.advanced_to

        rejection: None | str | Unset
        if isinstance(self.rejection, Unset):
            rejection = UNSET
        elif isinstance(self.rejection, Rejection):
            rejection = self.rejection.value
        else:
            rejection = self.rejection


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "contradictions": contradictions,
            "coverage_path": coverage_path,
            "covered": covered,
            "from": from_,
            "mode": mode,
            "not_compacted": not_compacted,
            "outcome": outcome,
            "over_ceiling": over_ceiling,
            "prefix_tokens": prefix_tokens,
            "required_budget": required_budget,
            "summary_budget": summary_budget,
            "summary_tokens": summary_tokens,
            "to": to,
            "truncated": truncated,
            "truncation_signals": truncation_signals,
            "turns": turns,
            "uncovered": uncovered,
            "checkpoint_id": checkpoint_id,
            "conversation": conversation,
            "created_at": created_at,
            "summary": summary,
        })
        if advanced_to is not UNSET:
            field_dict["advanced_to"] = advanced_to
        if rejection is not UNSET:
            field_dict["rejection"] = rejection

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.turn_detail import TurnDetail
        d = dict(src_dict)
        contradictions = []
        _contradictions = d.pop("contradictions")
        for componentsschemas_id_ranges_item_data in (_contradictions):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            contradictions.append(componentsschemas_id_ranges_item)


        coverage_path = CoveragePath(d.pop("coverage_path"))




        covered = []
        _covered = d.pop("covered")
        for componentsschemas_id_ranges_item_data in (_covered):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            covered.append(componentsschemas_id_ranges_item)


        from_ = d.pop("from")

        mode = Mode(d.pop("mode"))




        not_compacted = []
        _not_compacted = d.pop("not_compacted")
        for componentsschemas_id_ranges_item_data in (_not_compacted):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            not_compacted.append(componentsschemas_id_ranges_item)


        outcome = Outcome(d.pop("outcome"))




        over_ceiling = d.pop("over_ceiling")

        prefix_tokens = d.pop("prefix_tokens")

        required_budget = d.pop("required_budget")

        summary_budget = d.pop("summary_budget")

        summary_tokens = d.pop("summary_tokens")

        to = d.pop("to")

        truncated = d.pop("truncated")

        truncation_signals = []
        _truncation_signals = d.pop("truncation_signals")
        for truncation_signals_item_data in (_truncation_signals):
            truncation_signals_item = TruncationSignal(truncation_signals_item_data)



            truncation_signals.append(truncation_signals_item)


        turns = []
        _turns = d.pop("turns")
        for turns_item_data in (_turns):
            turns_item = TurnDetail.from_dict(turns_item_data)



            turns.append(turns_item)


        uncovered = []
        _uncovered = d.pop("uncovered")
        for componentsschemas_id_ranges_item_data in (_uncovered):
            componentsschemas_id_ranges_item = cast(list[int], componentsschemas_id_ranges_item_data)

            uncovered.append(componentsschemas_id_ranges_item)


        checkpoint_id = d.pop("checkpoint_id")

        conversation = d.pop("conversation")

        created_at = isoparse(d.pop("created_at"))




        summary = d.pop("summary")

        def _parse_advanced_to(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        advanced_to = _parse_advanced_to(d.pop("advanced_to", UNSET))


        def _parse_rejection(data: object) -> None | Rejection | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                rejection_type_0 = Rejection(data)



                return rejection_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Rejection | Unset, data)

        rejection = _parse_rejection(d.pop("rejection", UNSET))


        checkpoint_response = cls(
            contradictions=contradictions,
            coverage_path=coverage_path,
            covered=covered,
            from_=from_,
            mode=mode,
            not_compacted=not_compacted,
            outcome=outcome,
            over_ceiling=over_ceiling,
            prefix_tokens=prefix_tokens,
            required_budget=required_budget,
            summary_budget=summary_budget,
            summary_tokens=summary_tokens,
            to=to,
            truncated=truncated,
            truncation_signals=truncation_signals,
            turns=turns,
            uncovered=uncovered,
            checkpoint_id=checkpoint_id,
            conversation=conversation,
            created_at=created_at,
            summary=summary,
            advanced_to=advanced_to,
            rejection=rejection,
        )


        checkpoint_response.additional_properties = d
        return checkpoint_response

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
