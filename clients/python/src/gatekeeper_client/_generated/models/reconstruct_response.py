from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.reason import Reason
from ..models.role import Role
from ..models.source import Source
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.evidence import Evidence





T = TypeVar("T", bound="ReconstructResponse")



@_attrs_define
class ReconstructResponse:
    """ 
        Example:
            {'checkpoint_id': 1, 'evidence': [{'anchor': 'mia_li_3668', 'end': 30, 'start': 19}], 'reason': None, 'role':
                'user', 'source': 'summary', 'text': '<summary>Mia (user mia_li_3668) wants a flight from New York to Seattle on
                May 20th.</summary>', 'turn': 2}

        Attributes:
            evidence (list[Evidence]): Where each anchor that decided the turn occurs in the summary (only for `summary`).
            role (Role):
            source (Source):
            text (str):
            turn (int):
            checkpoint_id (int | None | Unset):
            reason (None | Reason | Unset):
     """

    evidence: list[Evidence]
    role: Role
    source: Source
    text: str
    turn: int
    checkpoint_id: int | None | Unset = UNSET
    reason: None | Reason | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.evidence import Evidence
        evidence = []
        for evidence_item_data in self.evidence:
            evidence_item = evidence_item_data.to_dict()
            evidence.append(evidence_item)



        role = self.role.value

        source = self.source.value

        text = self.text

        turn = self.turn

        checkpoint_id: int | None | Unset
        if isinstance(self.checkpoint_id, Unset):
            checkpoint_id = UNSET
        else:
            checkpoint_id = self.checkpoint_id

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        elif isinstance(self.reason, Reason):
            reason = self.reason.value
        else:
            reason = self.reason


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "evidence": evidence,
            "role": role,
            "source": source,
            "text": text,
            "turn": turn,
        })
        if checkpoint_id is not UNSET:
            field_dict["checkpoint_id"] = checkpoint_id
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evidence import Evidence
        d = dict(src_dict)
        evidence = []
        _evidence = d.pop("evidence")
        for evidence_item_data in (_evidence):
            evidence_item = Evidence.from_dict(evidence_item_data)



            evidence.append(evidence_item)


        role = Role(d.pop("role"))




        source = Source(d.pop("source"))




        text = d.pop("text")

        turn = d.pop("turn")

        def _parse_checkpoint_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        checkpoint_id = _parse_checkpoint_id(d.pop("checkpoint_id", UNSET))


        def _parse_reason(data: object) -> None | Reason | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                reason_type_0 = Reason(data)



                return reason_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Reason | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))


        reconstruct_response = cls(
            evidence=evidence,
            role=role,
            source=source,
            text=text,
            turn=turn,
            checkpoint_id=checkpoint_id,
            reason=reason,
        )


        reconstruct_response.additional_properties = d
        return reconstruct_response

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
