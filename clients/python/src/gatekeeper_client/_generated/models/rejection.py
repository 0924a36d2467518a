from enum import StrEnum

class Rejection(StrEnum):
    NOTHING_COVERED = "nothing_covered"
    STRICT_MODE = "strict_mode"

    def __str__(self) -> str:
        return str(self.value)
