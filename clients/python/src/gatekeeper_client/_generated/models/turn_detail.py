from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.reason import Reason
from ..models.turn_status import TurnStatus
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.anchor_evidence import AnchorEvidence





T = TypeVar("T", bound="TurnDetail")



@_attrs_define
class TurnDetail:
    """ A turn the verdict does not cover, and why.

        Attributes:
            id (int):
            missing_anchors (list[str]):
            reason (Reason):
            status (TurnStatus):
            evidence (list[AnchorEvidence] | Unset): For a turn whose anchors the service derived: the anchors rule 2b
                checked, each with the
                number of turns of the range that hold it.
     """

    id: int
    missing_anchors: list[str]
    reason: Reason
    status: TurnStatus
    evidence: list[AnchorEvidence] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.anchor_evidence import AnchorEvidence
        id = self.id

        missing_anchors = self.missing_anchors



        reason = self.reason.value

        status = self.status.value

        evidence: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.evidence, Unset):
            evidence = []
            for evidence_item_data in self.evidence:
                evidence_item = evidence_item_data.to_dict()
                evidence.append(evidence_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "missing_anchors": missing_anchors,
            "reason": reason,
            "status": status,
        })
        if evidence is not UNSET:
            field_dict["evidence"] = evidence

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.anchor_evidence import AnchorEvidence
        d = dict(src_dict)
        id = d.pop("id")

        missing_anchors = cast(list[str], d.pop("missing_anchors"))


        reason = Reason(d.pop("reason"))




        status = TurnStatus(d.pop("status"))




        _evidence = d.pop("evidence", UNSET)
        evidence: list[AnchorEvidence] | Unset = UNSET
        if _evidence is not UNSET:
            evidence = []
            for evidence_item_data in _evidence:
                evidence_item = AnchorEvidence.from_dict(evidence_item_data)



                evidence.append(evidence_item)


        turn_detail = cls(
            id=id,
            missing_anchors=missing_anchors,
            reason=reason,
            status=status,
            evidence=evidence,
        )


        turn_detail.additional_properties = d
        return turn_detail

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
