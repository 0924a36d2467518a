from enum import Enum

class ContextItemType0Type(str, Enum):
    SUMMARY = "summary"

    def __str__(self) -> str:
        return str(self.value)
