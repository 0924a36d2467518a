from enum import StrEnum

class Advice(StrEnum):
    COMPACT = "compact"
    RAISE_BUDGET = "raise_budget"
    WAIT = "wait"

    def __str__(self) -> str:
        return str(self.value)
