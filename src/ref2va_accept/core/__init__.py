"""The vocabulary every stage shares: the error hierarchy, the names of checks, reasons and
verdicts and the records they make, file hashes, the `<FILL: ...>` placeholder, the evidence's
safe writers and the HTTP clients' one TLS context. It imports nothing else of the judge.

The modules are private; the other stages import these names from here.
"""

from ref2va_accept.core._checks import (
    CHECK_REASON_CATEGORIES,
    Category,
    Check,
    Reason,
    check_name,
    reason_code,
    reasons_of,
    required_checks,
)
from ref2va_accept.core._errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_PROBLEM,
    CampaignError,
    EngineStartError,
    ForeignServerError,
    FreezeError,
    LocalizeError,
    MediaContentError,
    MediaError,
    Ref2VAError,
    TensorFileError,
)
from ref2va_accept.core._hashing import file_sha256, tree_sha256
from ref2va_accept.core._http import tls_context
from ref2va_accept.core._lazy import load_name
from ref2va_accept.core._placeholder import is_placeholder
from ref2va_accept.core._safe_write import (
    WriteFailed,
    append_line,
    atomic_write,
    os_error_text,
    write_new,
)
from ref2va_accept.core._vocabulary import (
    CALIBRATED_CONFIDENCE,
    CALIBRATED_DECISION_RULE,
    DEFAULT_CONFIDENCE,
    DEFAULT_DECISION_RULE,
    DEFAULT_TARGET_RATIO,
    ArmRole,
    CheckStatus,
    DecisionRule,
    IntervalReason,
    LatencyDecisionReason,
    QualityClass,
    Unit,
    Verdict,
    enum_member,
)

__all__ = [
    "CALIBRATED_CONFIDENCE",
    "CALIBRATED_DECISION_RULE",
    "CHECK_REASON_CATEGORIES",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_DECISION_RULE",
    "DEFAULT_TARGET_RATIO",
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_PROBLEM",
    "ArmRole",
    "CampaignError",
    "Category",
    "Check",
    "CheckStatus",
    "DecisionRule",
    "EngineStartError",
    "ForeignServerError",
    "FreezeError",
    "IntervalReason",
    "LatencyDecisionReason",
    "LocalizeError",
    "MediaContentError",
    "MediaError",
    "QualityClass",
    "Reason",
    "Ref2VAError",
    "TensorFileError",
    "Unit",
    "Verdict",
    "WriteFailed",
    "append_line",
    "atomic_write",
    "check_name",
    "enum_member",
    "file_sha256",
    "is_placeholder",
    "load_name",
    "os_error_text",
    "reason_code",
    "reasons_of",
    "required_checks",
    "tls_context",
    "tree_sha256",
    "write_new",
]
