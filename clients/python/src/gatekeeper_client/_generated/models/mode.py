from enum import Enum

class Mode(str, Enum):
    NARROW = "narrow"
    STRICT = "strict"

    def __str__(self) -> str:
        return str(self.value)
