from enum import StrEnum

class ContextItemType2Type(StrEnum):
    STUB = "stub"

    def __str__(self) -> str:
        return str(self.value)
