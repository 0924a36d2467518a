from enum import Enum

class Advice(str, Enum):
    COMPACT = "compact"
    RAISE_BUDGET = "raise_budget"
    WAIT = "wait"

    def __str__(self) -> str:
        return str(self.value)
