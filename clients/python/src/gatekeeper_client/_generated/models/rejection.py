from enum import Enum

class Rejection(str, Enum):
    NOTHING_COVERED = "nothing_covered"
    STRICT_MODE = "strict_mode"

    def __str__(self) -> str:
        return str(self.value)
