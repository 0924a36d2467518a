from enum import Enum

class ContextItemType2Type(str, Enum):
    STUB = "stub"

    def __str__(self) -> str:
        return str(self.value)
