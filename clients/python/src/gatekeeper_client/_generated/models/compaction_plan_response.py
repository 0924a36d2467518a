from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.advice import Advice
from ..models.advice_reason import AdviceReason
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.planned_turn import PlannedTurn





T = TypeVar("T", bound="CompactionPlanResponse")



@_attrs_define
class CompactionPlanResponse:
    """ 
        Example:
            {'advice': 'compact', 'advice_reason': 'fits', 'anchor_tokens': 9, 'budget_for_next_turn': None, 'from': 0,
                'prefix_tokens': 320, 'recent_rejections': 0, 'required_budget': 64, 'summary_budget': 64, 'to': 2, 'turns':
                [{'anchor_origin': 'derived', 'anchors': ['Seattle', 'York', 'May'], 'evidence': [{'anchor': 'Seattle',
                'turns_sharing': 1}, {'anchor': 'York', 'turns_sharing': 1}, {'anchor': 'May', 'turns_sharing': 1}], 'id': 0,
                'unanchored': None}, {'anchor_origin': 'derived', 'anchors': ['assist', 'provide', 'booking'], 'evidence':
                [{'anchor': 'assist', 'turns_sharing': 1}, {'anchor': 'provide', 'turns_sharing': 1}, {'anchor': 'booking',
                'turns_sharing': 1}], 'id': 1, 'unanchored': None}, {'anchor_origin': 'derived', 'anchors': ['mia_li_3668'],
                'evidence': [{'anchor': 'mia_li_3668', 'turns_sharing': 1}], 'id': 2, 'unanchored': None}], 'worthwhile_tokens':
                64}

        Attributes:
            advice (Advice):
            advice_reason (AdviceReason):
            anchor_tokens (int): Tokens the range's anchors take written out, a separator each. `to` is also held back so
                that they take at most half the budget: a summary needs room around them.
            from_ (int):
            prefix_tokens (int):
            recent_rejections (int): Proposals from this `from` rejected in a row (dry runs aside); 3 or more advise `wait`.
            required_budget (int):
            summary_budget (int):
            turns (list[PlannedTurn]): For each turn of `[from, to]`: what the summary must hold for the decision to count
                it
                covered, exactly as the decision will check it for this range.
            worthwhile_tokens (int): A range is worth a summary from this many tokens: the summary budget (below that, the
                summary may be no smaller than what it replaces).
            budget_for_next_turn (int | None | Unset): Set when the budget cut the range short of the compactable turns: the
                summary budget
                that would take in its next turn (`advice_reason` `next_turn_over_budget` when the range
                is too small without it).
            to (int | None | Unset): The largest `to` whose range fits the budget; `null` when not even `from` fits.
     """

    advice: Advice
    advice_reason: AdviceReason
    anchor_tokens: int
    from_: int
    prefix_tokens: int
    recent_rejections: int
    required_budget: int
    summary_budget: int
    turns: list[PlannedTurn]
    worthwhile_tokens: int
    budget_for_next_turn: int | None | Unset = UNSET
    to: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.planned_turn import PlannedTurn
        advice = self.advice.value

        advice_reason = self.advice_reason.value

        anchor_tokens = self.anchor_tokens

        from_ = self.from_

        prefix_tokens = self.prefix_tokens

        recent_rejections = self.recent_rejections

        required_budget = self.required_budget

        summary_budget = self.summary_budget

        turns = []
        for turns_item_data in self.turns:
            turns_item = turns_item_data.to_dict()
            turns.append(turns_item)



        worthwhile_tokens = self.worthwhile_tokens

        budget_for_next_turn: int | None | Unset
        if isinstance(self.budget_for_next_turn, Unset):
            budget_for_next_turn = UNSET
        else:
            budget_for_next_turn = self.budget_for_next_turn

        to: int | None | Unset
        if isinstance(self.to, Unset):
            to = UNSET
        else:
            to = self.to


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "advice": advice,
            "advice_reason": advice_reason,
            "anchor_tokens": anchor_tokens,
            "from": from_,
            "prefix_tokens": prefix_tokens,
            "recent_rejections": recent_rejections,
            "required_budget": required_budget,
            "summary_budget": summary_budget,
            "turns": turns,
            "worthwhile_tokens": worthwhile_tokens,
        })
        if budget_for_next_turn is not UNSET:
            field_dict["budget_for_next_turn"] = budget_for_next_turn
        if to is not UNSET:
            field_dict["to"] = to

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.planned_turn import PlannedTurn
        d = dict(src_dict)
        advice = Advice(d.pop("advice"))




        advice_reason = AdviceReason(d.pop("advice_reason"))




        anchor_tokens = d.pop("anchor_tokens")

        from_ = d.pop("from")

        prefix_tokens = d.pop("prefix_tokens")

        recent_rejections = d.pop("recent_rejections")

        required_budget = d.pop("required_budget")

        summary_budget = d.pop("summary_budget")

        turns = []
        _turns = d.pop("turns")
        for turns_item_data in (_turns):
            turns_item = PlannedTurn.from_dict(turns_item_data)



            turns.append(turns_item)


        worthwhile_tokens = d.pop("worthwhile_tokens")

        def _parse_budget_for_next_turn(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        budget_for_next_turn = _parse_budget_for_next_turn(d.pop("budget_for_next_turn", UNSET))


        def _parse_to(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        to = _parse_to(d.pop("to", UNSET))


        compaction_plan_response = cls(
            advice=advice,
            advice_reason=advice_reason,
            anchor_tokens=anchor_tokens,
            from_=from_,
            prefix_tokens=prefix_tokens,
            recent_rejections=recent_rejections,
            required_budget=required_budget,
            summary_budget=summary_budget,
            turns=turns,
            worthwhile_tokens=worthwhile_tokens,
            budget_for_next_turn=budget_for_next_turn,
            to=to,
        )


        compaction_plan_response.additional_properties = d
        return compaction_plan_response

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
