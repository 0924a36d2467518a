""" Contains all the data models used in inputs/outputs """

from .advice import Advice
from .advice_reason import AdviceReason
from .anchor_evidence import AnchorEvidence
from .anchor_origin import AnchorOrigin
from .append_turn import AppendTurn
from .append_turns_request import AppendTurnsRequest
from .append_turns_response import AppendTurnsResponse
from .appended_turn import AppendedTurn
from .checkpoint_item import CheckpointItem
from .checkpoint_list_response import CheckpointListResponse
from .checkpoint_ref import CheckpointRef
from .checkpoint_response import CheckpointResponse
from .compaction_plan_response import CompactionPlanResponse
from .compaction_request_body import CompactionRequestBody
from .context_item_type_0 import ContextItemType0
from .context_item_type_0_type import ContextItemType0Type
from .context_item_type_1 import ContextItemType1
from .context_item_type_1_type import ContextItemType1Type
from .context_item_type_2 import ContextItemType2
from .context_item_type_2_type import ContextItemType2Type
from .context_response import ContextResponse
from .conversation_list_item import ConversationListItem
from .conversation_list_response import ConversationListResponse
from .conversation_response import ConversationResponse
from .coverage_path import CoveragePath
from .evidence import Evidence
from .import_response import ImportResponse
from .mode import Mode
from .outcome import Outcome
from .planned_turn import PlannedTurn
from .problem import Problem
from .reason import Reason
from .reconstruct_response import ReconstructResponse
from .rejection import Rejection
from .role import Role
from .search_hit import SearchHit
from .search_match import SearchMatch
from .search_response import SearchResponse
from .search_snippet import SearchSnippet
from .search_term import SearchTerm
from .source import Source
from .status import Status
from .truncation_signal import TruncationSignal
from .turn_detail import TurnDetail
from .turn_list_item import TurnListItem
from .turn_list_response import TurnListResponse
from .turn_patch import TurnPatch
from .turn_response import TurnResponse
from .turn_status import TurnStatus
from .verdict import Verdict
from .verdict_response import VerdictResponse

__all__ = (
    "Advice",
    "AdviceReason",
    "AnchorEvidence",
    "AnchorOrigin",
    "AppendedTurn",
    "AppendTurn",
    "AppendTurnsRequest",
    "AppendTurnsResponse",
    "CheckpointItem",
    "CheckpointListResponse",
    "CheckpointRef",
    "CheckpointResponse",
    "CompactionPlanResponse",
    "CompactionRequestBody",
    "ContextItemType0",
    "ContextItemType0Type",
    "ContextItemType1",
    "ContextItemType1Type",
    "ContextItemType2",
    "ContextItemType2Type",
    "ContextResponse",
    "ConversationListItem",
    "ConversationListResponse",
    "ConversationResponse",
    "CoveragePath",
    "Evidence",
    "ImportResponse",
    "Mode",
    "Outcome",
    "PlannedTurn",
    "Problem",
    "Reason",
    "ReconstructResponse",
    "Rejection",
    "Role",
    "SearchHit",
    "SearchMatch",
    "SearchResponse",
    "SearchSnippet",
    "SearchTerm",
    "Source",
    "Status",
    "TruncationSignal",
    "TurnDetail",
    "TurnListItem",
    "TurnListResponse",
    "TurnPatch",
    "TurnResponse",
    "TurnStatus",
    "Verdict",
    "VerdictResponse",
)
