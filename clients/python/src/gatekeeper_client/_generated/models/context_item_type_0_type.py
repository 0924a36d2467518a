from enum import StrEnum

class ContextItemType0Type(StrEnum):
    SUMMARY = "summary"

    def __str__(self) -> str:
        return str(self.value)
