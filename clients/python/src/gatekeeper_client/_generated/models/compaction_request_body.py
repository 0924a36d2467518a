from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.mode import Mode
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="CompactionRequestBody")



@_attrs_define
class CompactionRequestBody:
    """ 
        Example:
            {'end_marker': '</summary>', 'finish_reason': 'stop', 'from': 0, 'summary': '<summary>Mia (user mia_li_3668)
                wants a flight from New York to Seattle on May 20th.</summary>', 'summary_budget': 512, 'to': 2}

        Attributes:
            from_ (int): First turn of the range (inclusive).
            summary (str):
            summary_budget (int): The token budget the summary was written under.
            to (int): Last turn of the range (inclusive); not before `from`, and in the log.
            consumed (list[list[int]] | None | Unset):
            dry_run (bool | Unset):
            end_marker (None | str | Unset):
            expected_checkpoint (int | None | Unset): Absent: no check. `null`: the conversation must have no checkpoint
                yet. A number: it must
                be the latest checkpoint's id.
            finish_reason (None | str | Unset):
            mode (Mode | None | Unset):
     """

    from_: int
    summary: str
    summary_budget: int
    to: int
    consumed: list[list[int]] | None | Unset = UNSET
    dry_run: bool | Unset = UNSET
    end_marker: None | str | Unset = UNSET
    expected_checkpoint: int | None | Unset = UNSET
    finish_reason: None | str | Unset = UNSET
    mode: Mode | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_

        summary = self.summary

        summary_budget = self.summary_budget

        to = self.to

        consumed: list[list[int]] | None | Unset
        if isinstance(self.consumed, Unset):
            consumed = UNSET
        elif isinstance(self.consumed, list):
            consumed = []
            for consumed_type_0_item_data in self.consumed:
                consumed_type_0_item = consumed_type_0_item_data


                consumed.append(consumed_type_0_item)


        else:
            consumed = self.consumed

        dry_run = self.dry_run

        end_marker: None | str | Unset
        if isinstance(self.end_marker, Unset):
            end_marker = UNSET
        else:
            end_marker = self.end_marker

        expected_checkpoint: int | None | Unset
        if isinstance(self.expected_checkpoint, Unset):
            expected_checkpoint = UNSET
        else:
            expected_checkpoint = self.expected_checkpoint

        finish_reason: None | str | Unset
        if isinstance(self.finish_reason, Unset):
            finish_reason = UNSET
        else:
            finish_reason = self.finish_reason

        mode: None | str | Unset
        if isinstance(self.mode, Unset):
            mode = UNSET
        elif isinstance(self.mode, Mode):
            mode = self.mode.value
        else:
            mode = self.mode


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "from": from_,
            "summary": summary,
            "summary_budget": summary_budget,
            "to": to,
        })
        if consumed is not UNSET:
            field_dict["consumed"] = consumed
        if dry_run is not UNSET:
            field_dict["dry_run"] = dry_run
        if end_marker is not UNSET:
            field_dict["end_marker"] = end_marker
        if expected_checkpoint is not UNSET:
            field_dict["expected_checkpoint"] = expected_checkpoint
        if finish_reason is not UNSET:
            field_dict["finish_reason"] = finish_reason
        if mode is not UNSET:
            field_dict["mode"] = mode

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        from_ = d.pop("from")

        summary = d.pop("summary")

        summary_budget = d.pop("summary_budget")

        to = d.pop("to")

        def _parse_consumed(data: object) -> list[list[int]] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                consumed_type_0 = []
                _consumed_type_0 = data
                for consumed_type_0_item_data in (_consumed_type_0):
                    consumed_type_0_item = cast(list[int], consumed_type_0_item_data)

                    consumed_type_0.append(consumed_type_0_item)

                return consumed_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[list[int]] | None | Unset, data)

        consumed = _parse_consumed(d.pop("consumed", UNSET))


        dry_run = d.pop("dry_run", UNSET)

        def _parse_end_marker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        end_marker = _parse_end_marker(d.pop("end_marker", UNSET))


        def _parse_expected_checkpoint(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        expected_checkpoint = _parse_expected_checkpoint(d.pop("expected_checkpoint", UNSET))


        def _parse_finish_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        finish_reason = _parse_finish_reason(d.pop("finish_reason", UNSET))


        def _parse_mode(data: object) -> Mode | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                mode_type_0 = Mode(data)



                return mode_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Mode | None | Unset, data)

        mode = _parse_mode(d.pop("mode", UNSET))


        compaction_request_body = cls(
            from_=from_,
            summary=summary,
            summary_budget=summary_budget,
            to=to,
            consumed=consumed,
            dry_run=dry_run,
            end_marker=end_marker,
            expected_checkpoint=expected_checkpoint,
            finish_reason=finish_reason,
            mode=mode,
        )

        return compaction_request_body

