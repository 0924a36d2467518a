from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.anchor_origin import AnchorOrigin
from ..models.reason import Reason
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.anchor_evidence import AnchorEvidence





T = TypeVar("T", bound="PlannedTurn")



@_attrs_define
class PlannedTurn:
    """ One turn of a planned range and what the decision will check for it.

        Attributes:
            anchor_origin (AnchorOrigin): Who chose a turn's anchors.
            anchors (list[str]): The anchors the summary must hold (all of them, or under the `any` rule one that only
                this turn holds), best first: the client's, or rule 2b's for this range.
            id (int):
            evidence (list[AnchorEvidence] | Unset): For derived anchors: each with the number of turns of the range that
                hold it (1: the
                turn's own).
            unanchored (None | Reason | Unset):
     """

    anchor_origin: AnchorOrigin
    anchors: list[str]
    id: int
    evidence: list[AnchorEvidence] | Unset = UNSET
    unanchored: None | Reason | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.anchor_evidence import AnchorEvidence
        anchor_origin = self.anchor_origin.value

        anchors = self.anchors



        id = self.id

        evidence: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.evidence, Unset):
            evidence = []
            for evidence_item_data in self.evidence:
                evidence_item = evidence_item_data.to_dict()
                evidence.append(evidence_item)



        unanchored: None | str | Unset
        if isinstance(self.unanchored, Unset):
            unanchored = UNSET
        elif isinstance(self.unanchored, Reason):
            unanchored = self.unanchored.value
        else:
            unanchored = self.unanchored


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "anchor_origin": anchor_origin,
            "anchors": anchors,
            "id": id,
        })
        if evidence is not UNSET:
            field_dict["evidence"] = evidence
        if unanchored is not UNSET:
            field_dict["unanchored"] = unanchored

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.anchor_evidence import AnchorEvidence
        d = dict(src_dict)
        anchor_origin = AnchorOrigin(d.pop("anchor_origin"))




        anchors = cast(list[str], d.pop("anchors"))


        id = d.pop("id")

        _evidence = d.pop("evidence", UNSET)
        evidence: list[AnchorEvidence] | Unset = UNSET
        if _evidence is not UNSET:
            evidence = []
            for evidence_item_data in _evidence:
                evidence_item = AnchorEvidence.from_dict(evidence_item_data)



                evidence.append(evidence_item)


        def _parse_unanchored(data: object) -> None | Reason | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                unanchored_type_0 = Reason(data)



                return unanchored_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Reason | Unset, data)

        unanchored = _parse_unanchored(d.pop("unanchored", UNSET))


        planned_turn = cls(
            anchor_origin=anchor_origin,
            anchors=anchors,
            id=id,
            evidence=evidence,
            unanchored=unanchored,
        )


        planned_turn.additional_properties = d
        return planned_turn

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
