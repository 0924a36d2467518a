from enum import StrEnum

class AnchorOrigin(StrEnum):
    DERIVED = "derived"
    GIVEN = "given"

    def __str__(self) -> str:
        return str(self.value)
