from enum import Enum

class AnchorOrigin(str, Enum):
    DERIVED = "derived"
    GIVEN = "given"

    def __str__(self) -> str:
        return str(self.value)
