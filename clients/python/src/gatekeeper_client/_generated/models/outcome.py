from enum import StrEnum

class Outcome(StrEnum):
    ACCEPTED = "accepted"
    NARROWED = "narrowed"
    PARTIAL = "partial"
    REJECTED = "rejected"

    def __str__(self) -> str:
        return str(self.value)
