from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.checkpoint_ref import CheckpointRef





T = TypeVar("T", bound="ConversationResponse")



@_attrs_define
class ConversationResponse:
    """ 
        Example:
            {'checkpoints': 1, 'conversation': 'airline-0-0', 'latest_checkpoint': {'advanced_to': 2, 'checkpoint_id': 1,
                'from': 0, 'outcome': 'narrowed'}, 'next_id': 3, 'total_tokens': 51}

        Attributes:
            checkpoints (int):
            conversation (str):
            next_id (int):
            total_tokens (int):
            latest_checkpoint (CheckpointRef | None | Unset):
     """

    checkpoints: int
    conversation: str
    next_id: int
    total_tokens: int
    latest_checkpoint: CheckpointRef | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.checkpoint_ref import CheckpointRef
        checkpoints = self.checkpoints

        conversation = self.conversation

        next_id = self.next_id

        total_tokens = self.total_tokens

        latest_checkpoint: dict[str, Any] | None | Unset
        if isinstance(self.latest_checkpoint, Unset):
            latest_checkpoint = UNSET
        elif isinstance(self.latest_checkpoint, CheckpointRef):
            latest_checkpoint = self.latest_checkpoint.to_dict()
        else:
            latest_checkpoint = self.latest_checkpoint


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "checkpoints": checkpoints,
            "conversation": conversation,
            "next_id": next_id,
            "total_tokens": total_tokens,
        })
        if latest_checkpoint is not UNSET:
            field_dict["latest_checkpoint"] = latest_checkpoint

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.checkpoint_ref import CheckpointRef
        d = dict(src_dict)
        checkpoints = d.pop("checkpoints")

        conversation = d.pop("conversation")

        next_id = d.pop("next_id")

        total_tokens = d.pop("total_tokens")

        def _parse_latest_checkpoint(data: object) -> CheckpointRef | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                latest_checkpoint_type_0 = CheckpointRef.from_dict(data)



                return latest_checkpoint_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CheckpointRef | None | Unset, data)

        latest_checkpoint = _parse_latest_checkpoint(d.pop("latest_checkpoint", UNSET))


        conversation_response = cls(
            checkpoints=checkpoints,
            conversation=conversation,
            next_id=next_id,
            total_tokens=total_tokens,
            latest_checkpoint=latest_checkpoint,
        )


        conversation_response.additional_properties = d
        return conversation_response

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
