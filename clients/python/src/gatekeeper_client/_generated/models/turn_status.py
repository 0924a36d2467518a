from enum import StrEnum

class TurnStatus(StrEnum):
    NOT_COMPACTED = "not_compacted"
    UNCOVERED = "uncovered"

    def __str__(self) -> str:
        return str(self.value)
