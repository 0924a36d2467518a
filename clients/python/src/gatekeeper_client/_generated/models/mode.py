from enum import StrEnum

class Mode(StrEnum):
    NARROW = "narrow"
    STRICT = "strict"

    def __str__(self) -> str:
        return str(self.value)
