from enum import StrEnum

class ContextItemType1Type(StrEnum):
    TURN = "turn"

    def __str__(self) -> str:
        return str(self.value)
