from enum import Enum

class Outcome(str, Enum):
    ACCEPTED = "accepted"
    NARROWED = "narrowed"
    PARTIAL = "partial"
    REJECTED = "rejected"

    def __str__(self) -> str:
        return str(self.value)
