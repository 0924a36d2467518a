from enum import Enum

class TurnStatus(str, Enum):
    NOT_COMPACTED = "not_compacted"
    UNCOVERED = "uncovered"

    def __str__(self) -> str:
        return str(self.value)
