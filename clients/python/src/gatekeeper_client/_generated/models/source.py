from enum import Enum

class Source(str, Enum):
    LIVE = "live"
    RAW_LOG = "raw_log"
    SUMMARY = "summary"

    def __str__(self) -> str:
        return str(self.value)
