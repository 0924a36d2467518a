from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.context_item_type_0 import ContextItemType0
  from ..models.context_item_type_1 import ContextItemType1
  from ..models.context_item_type_2 import ContextItemType2





T = TypeVar("T", bound="ContextResponse")



@_attrs_define
class ContextResponse:
    """ 
        Example:
            {'conversation': 'airline-0-0', 'items': [{'checkpoint_id': 1, 'covers': [[0, 0], [2, 2]], 'text': '<summary>Mia
                (user mia_li_3668) wants a flight from New York to Seattle on May 20th.</summary>', 'tokens': 28, 'type':
                'summary'}, {'content': "To assist you with booking a flight, I'll need your user ID. Could you please provide
                that?", 'id': 1, 'role': 'assistant', 'source': 'raw_log', 'tokens': 20, 'type': 'turn'}], 'total_tokens': 48}

        Attributes:
            conversation (str):
            items (list[ContextItemType0 | ContextItemType1 | ContextItemType2]):
            total_tokens (int): Tokens of every item: summaries count their summary tokens, turns their own, stubs what
                the stub itself takes (`stub_tokens`).
            fits (bool | None | Unset): With `max_tokens` only: whether the context fits it. `false` when the summaries,
                pinned
                turns and live tail alone (every other turn a stub) take more; the answer is then that
                smallest context, never a silent cut.
            max_tokens (int | None | Unset): With `max_tokens` only: the budget asked for.
            smallest_max_tokens (int | None | Unset): With `max_tokens` only: the smallest `max_tokens` that fits (every
                stubbable turn a stub).
     """

    conversation: str
    items: list[ContextItemType0 | ContextItemType1 | ContextItemType2]
    total_tokens: int
    fits: bool | None | Unset = UNSET
    max_tokens: int | None | Unset = UNSET
    smallest_max_tokens: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.context_item_type_0 import ContextItemType0
        from ..models.context_item_type_1 import ContextItemType1
        from ..models.context_item_type_2 import ContextItemType2
        conversation = self.conversation

        items = []
        for items_item_data in self.items:
            items_item: dict[str, Any]
            if isinstance(items_item_data, ContextItemType0):
                items_item = items_item_data.to_dict()
            elif isinstance(items_item_data, ContextItemType1):
                items_item = items_item_data.to_dict()
            else:
                items_item = items_item_data.to_dict()

            items.append(items_item)



        total_tokens = self.total_tokens

        fits: bool | None | Unset
        if isinstance(self.fits, Unset):
            fits = UNSET
        else:
            fits = self.fits

        max_tokens: int | None | Unset
        if isinstance(self.max_tokens, Unset):
            max_tokens = UNSET
        else:
            max_tokens = self.max_tokens

        smallest_max_tokens: int | None | Unset
        if isinstance(self.smallest_max_tokens, Unset):
            smallest_max_tokens = UNSET
        else:
            smallest_max_tokens = self.smallest_max_tokens


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "conversation": conversation,
            "items": items,
            "total_tokens": total_tokens,
        })
        if fits is not UNSET:
            field_dict["fits"] = fits
        if max_tokens is not UNSET:
            field_dict["max_tokens"] = max_tokens
        if smallest_max_tokens is not UNSET:
            field_dict["smallest_max_tokens"] = smallest_max_tokens

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.context_item_type_0 import ContextItemType0
        from ..models.context_item_type_1 import ContextItemType1
        from ..models.context_item_type_2 import ContextItemType2
        d = dict(src_dict)
        conversation = d.pop("conversation")

        items = []
        _items = d.pop("items")
        for items_item_data in (_items):
            def _parse_items_item(data: object) -> ContextItemType0 | ContextItemType1 | ContextItemType2:
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    componentsschemas_context_item_type_0 = ContextItemType0.from_dict(data)



                    return componentsschemas_context_item_type_0
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    componentsschemas_context_item_type_1 = ContextItemType1.from_dict(data)



                    return componentsschemas_context_item_type_1
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_context_item_type_2 = ContextItemType2.from_dict(data)



                return componentsschemas_context_item_type_2

            items_item = _parse_items_item(items_item_data)

            items.append(items_item)


        total_tokens = d.pop("total_tokens")

        def _parse_fits(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        fits = _parse_fits(d.pop("fits", UNSET))


        def _parse_max_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_tokens = _parse_max_tokens(d.pop("max_tokens", UNSET))


        def _parse_smallest_max_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        smallest_max_tokens = _parse_smallest_max_tokens(d.pop("smallest_max_tokens", UNSET))


        context_response = cls(
            conversation=conversation,
            items=items,
            total_tokens=total_tokens,
            fits=fits,
            max_tokens=max_tokens,
            smallest_max_tokens=smallest_max_tokens,
        )


        context_response.additional_properties = d
        return context_response

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
