from enum import Enum

class CoveragePath(str, Enum):
    ANCHORS = "anchors"
    REPORTED = "reported"

    def __str__(self) -> str:
        return str(self.value)
