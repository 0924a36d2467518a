from enum import Enum

class ContextItemType1Type(str, Enum):
    TURN = "turn"

    def __str__(self) -> str:
        return str(self.value)
