from enum import Enum

class TruncationSignal(str, Enum):
    AT_BUDGET = "at_budget"
    END_MARKER_MISSING = "end_marker_missing"
    FINISH_REASON_LENGTH = "finish_reason_length"
    MID_CLAUSE = "mid_clause"

    def __str__(self) -> str:
        return str(self.value)
