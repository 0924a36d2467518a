from enum import StrEnum

class CoveragePath(StrEnum):
    ANCHORS = "anchors"
    REPORTED = "reported"

    def __str__(self) -> str:
        return str(self.value)
