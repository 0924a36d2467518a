from enum import Enum

class AdviceReason(str, Enum):
    FIRST_TURN_OVER_BUDGET = "first_turn_over_budget"
    FITS = "fits"
    NEXT_TURN_OVER_BUDGET = "next_turn_over_budget"
    RANGE_TOO_SMALL = "range_too_small"
    RECENT_REJECTIONS = "recent_rejections"

    def __str__(self) -> str:
        return str(self.value)
