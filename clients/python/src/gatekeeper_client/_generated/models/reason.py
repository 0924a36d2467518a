from enum import Enum

class Reason(str, Enum):
    ANCHOR_MISSING = "anchor_missing"
    BEYOND_LAST_ANCHOR = "beyond_last_anchor"
    NOT_REPORTED = "not_reported"
    NO_ANCHORS = "no_anchors"
    PINNED = "pinned"

    def __str__(self) -> str:
        return str(self.value)
