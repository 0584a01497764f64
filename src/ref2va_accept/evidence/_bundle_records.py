"""The evidence bundle's records, typed: one pydantic model per event payload and per section,
read together into the Bundle of a run; the bundle's text and its published JSON Schema.

What the judge writes to `events.jsonl` and `evidence.json` is read back into these models and
nowhere else by key: ``evidence.project`` (and ``rebuild``, ``read_bundle_file``) give a
:class:`Bundle`, ``EvidenceBundle.record`` is the running run's, and every reader uses
attributes. Each model matches what its writer produces (the writer named on it); an unknown or
misspelt key, a missing one or a value of the wrong kind is an error naming the event and the
field. The published JSON Schema of evidence.json is generated from :class:`Bundle`
(:func:`evidence_schema`; ``ref2va-accept schema`` writes it), so the models, the schema and the
writers cannot drift apart.

The models read and write the format that the evidence has always had: a record dumps back
(:meth:`Record.json_dict`: by alias, with exactly the keys that were read, none added) to the
JSON it was read from, and the bundle's text is :func:`bundle_text`.

The records the bundle holds live by what they record: the checks in `_checks_records`, latency
samples and figures in `_latency_records`, media and their comparison in `_media_records`, the
host and its engines in `_host_records`, budget, ledger and human ratings in `_budget_records`,
profiles in `_profile_records`; here are the bundle, the verdicts, and the event log's own.

Numbers keep the type they were written with (`Number`: an int stays an int); figures that JSON
cannot hold as numbers are the strings "inf", "-inf" and "nan" where their writers spell them
out (`JsonNumber`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import GenerateJsonSchema, SkipJsonSchema

from ref2va_accept.core import (
    Check,
    CheckStatus,
    Reason,
    Verdict,
    check_name,
    enum_member,
    reason_code,
)
from ref2va_accept.evidence._base import Number, Record, Timestamp
from ref2va_accept.evidence._budget_records import Budget, HumanEvaluation, Ledger
from ref2va_accept.evidence._checks_records import (
    CHECK_ADAPTER,
    CHECK_REASON_SCHEMA,
    AnyCheck,
    CheckRecord,
)
from ref2va_accept.evidence._closed_sets import RunStatus
from ref2va_accept.evidence._host_records import (
    Bringup,
    Campaign,
    Cleanup,
    DeviceMemory,
    Disk,
    Environment,
    HostIdentity,
    Instance,
    Leftover,
)
from ref2va_accept.evidence._latency_records import Sample
from ref2va_accept.evidence._media_records import Media
from ref2va_accept.evidence._profile_records import Profile

__all__ = [
    "EVENT_MODELS",
    "SCHEMA_ID",
    "SCHEMA_VERSION",
    "SECTION_KEYS",
    "Bundle",
    "Event",
    "SectionEvent",
    "StatusChange",
    "TrackVerdict",
    "bundle_text",
    "evidence_schema",
    "looks_like_bundle",
    "schema_text",
    "section_value",
    "stand_in_label",
]


SCHEMA_VERSION: Final = "ref2va-evidence/1"
SCHEMA_ID: Final = "https://ref2va-accept/schemas/evidence.schema.json"


# -- the run's status -----------------------------------------------------------------------------


class StatusChange(Record):
    """The payload of a `status` event."""

    status: RunStatus
    finished_at: Timestamp | None


# -- verdicts ------------------------------------------------------------------------------------

def stand_in_label(files: Sequence[str] | None) -> str:
    """The label of a verdict whose lossy scores came from stand-in weights (`files`, their
    names), for the report, the terminal, the ledger and merge alike; "" without any."""
    return f"STAND-IN scores ({', '.join(files)})" if files else ""


def _status(value: str | CheckStatus) -> CheckStatus:
    return enum_member(CheckStatus, value, "status")


# A verdict speaks only the vocabulary, like a check: members or their strings, anything else
# refused naming the value and the allowed ones (core's reason_code and check_name).
_Reason = Annotated[Reason, BeforeValidator(reason_code)]
_Check = Annotated[Check, BeforeValidator(check_name)]
_Status = Annotated[CheckStatus, BeforeValidator(_status)]


def _every_key_written(schema: dict[str, Any]) -> None:
    """The schema of a record whose writer writes every key (`Record.json_dict_full`): each is
    required, a default being only the Python constructor's."""
    schema["required"] = list(schema["properties"])
    for field in schema["properties"].values():
        field.pop("default", None)


class TrackVerdict(Record):
    """One track verdict of one candidate: judging's `judge` builds it from the track's checks,
    history's `with_attempt` adds the ledger's attempts; written with every key."""

    model_config = ConfigDict(frozen=True, json_schema_extra=_every_key_written)

    track: str
    candidate: str | None
    verdict: Verdict
    reasons: tuple[_Reason, ...]
    open_checks: tuple[_Check, ...]
    checks: dict[_Check, _Status]
    note: str = ""
    holm: Literal["supported", "not supported"] | None = Field(
        default=None,
        description="with several candidates on the track: this one's verdict after Holm's "
                    "step-down over their latency p-values")
    p_value: Number | None = None  # its latency p-value (stats.p_value), where it has one
    attempt: int | None = Field(
        default=None,
        description="which attempt of this candidate on this track (the ledger's earlier ones "
                    "+ 1)")
    earlier: tuple[str, ...] = ()  # what the earlier attempts gave (run id: verdict (reasons))
    stand_in_weights: tuple[str, ...] = Field(
        default=(),
        description="the seeded stand-in weights files this row's lossy scores came from "
                    "(declared by the campaign or recognised by their sha256); empty: real "
                    "weights, or no model scored")
    localized: str = Field(
        default="",
        description="where a lossless candidate that is not bit-exact first parted from B0, as "
                    "its localization check named it (module path and step); empty when none did")

    @field_validator("verdict", mode="before")
    @classmethod
    def _in_vocabulary(cls, value: Any, info: ValidationInfo) -> Any:
        if value not in tuple(Verdict):
            raise ValueError(f"verdict {info.data.get('track')}/{info.data.get('candidate')}: "
                             f"{value!r} is not one of {', '.join(Verdict)}")
        return value

    @property
    def stand_in_label(self) -> str:
        """"" for scores of real weights; else the label every view of the verdict shows."""
        return stand_in_label(self.stand_in_weights)


# -- the bundle ----------------------------------------------------------------------------------

C = TypeVar("C", bound=CheckRecord[Any, Any])
_RUN_ID = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$"


class Bundle(Record):
    """One run of the acceptance suite: what it judged, with what, and what it saw
    (evidence/<run-id>/evidence.json). The projection of the run's events.jsonl; every string
    is sanitized (<host>, <user>, <ip>, <repo>, <abs>/name)."""

    schema_id: Literal["ref2va-evidence/1"] = Field(alias="schema")
    run_id: str = Field(pattern=_RUN_ID, description=(
        "a UTC time stamp and six random hex digits, or the name given with --run-id"))
    status: RunStatus = Field(description=(
        "running until the session ends; interrupted after Ctrl-C or SIGTERM; stopped when the "
        "harness refused to start an engine (an input not matching its pin, too little free "
        "disk for the estimated evidence; the notes say which); failed_write when a file of the "
        "evidence could not be written (a full disk; the notes or the terminal name it); killed "
        "when the judge died and its reaper ended the run"))
    started_at: Timestamp
    finished_at: Timestamp | None
    harness_version: str
    environment: Environment
    campaign: Campaign | None = Field(
        description="null until the first campaign scenario asks for the evidence")
    verdicts: list[TrackVerdict] = Field(
        description="one per track and candidate of the tracks that ran; set at the end")
    checks: list[AnyCheck]
    instances: list[Instance]
    samples: list[Sample]
    media: list[Media]
    notes: list[str]
    # Sections: absent until a `section` event sets one (evidence.SECTIONS).
    bringup: Bringup | SkipJsonSchema[None] = None
    host_identity: HostIdentity | SkipJsonSchema[None] = None
    device_memory: DeviceMemory | SkipJsonSchema[None] = None
    sanitized_files: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = Field(
        default=None, description="text files of the run rewritten by the final scrub")
    leftovers: list[Leftover] | SkipJsonSchema[None] = Field(
        default=None, description="engine processes of a dead run (their judge gone) stopped "
                                  "before this run's first engine")
    disk: Disk | SkipJsonSchema[None] = None
    ledger: Ledger | SkipJsonSchema[None] = None
    budget: Budget | SkipJsonSchema[None] = None
    human_evaluation: list[HumanEvaluation] | SkipJsonSchema[None] = Field(
        default=None, description="ratings of the blind review sheet (ref2va-accept review), "
                                  "one set per ratings file ingested after the run")
    profiles: list[Profile] | SkipJsonSchema[None] = Field(
        default=None, description="the profiling scenario's entries, one per profiled arm")

    # -- queries ---------------------------------------------------------------------------------
    def checks_of(self, kind: type[C], *, track: str | None = None,
                  arm: str | None = None) -> list[C]:
        """The checks of one kind (e.g. LatencyRatioCheck), filtered on what is given."""
        return [c for c in self.checks if isinstance(c, kind)
                and (track is None or c.track == track) and (arm is None or c.arm == arm)]

    def check_of(self, kind: type[C], track: str, arm: str) -> C | None:
        """The first check of one kind for an arm of a track, None when none was recorded."""
        return next(iter(self.checks_of(kind, track=track, arm=arm)), None)

    def samples_where(self, *, track: str | None = None, arm: str | None = None,
                      kind: str | None = None, ok: bool | None = None) -> list[Sample]:
        return [s for s in self.samples if (track is None or s.track == track)
                and (arm is None or s.arm == arm) and (kind is None or s.kind == kind)
                and (ok is None or s.ok == ok)]

    def instances_where(self, *, track: str | None = None,
                        arm: str | None = None) -> list[Instance]:
        return [i for i in self.instances if (track is None or i.track == track)
                and (arm is None or i.arm == arm)]

    def media_of(self, sample_id: str) -> Media | None:
        return next((m for m in self.media if m.sample_id == sample_id), None)


# The optional top-level sections, in the order Bundle declares them.
SECTION_KEYS: Final = ("bringup", "host_identity", "device_memory", "sanitized_files",
                       "leftovers", "disk", "ledger", "budget", "human_evaluation", "profiles")
_SECTION_ADAPTERS: Final[Mapping[str, TypeAdapter[Any]]] = {
    "bringup": TypeAdapter(Bringup), "host_identity": TypeAdapter(HostIdentity),
    "device_memory": TypeAdapter(DeviceMemory),
    "sanitized_files": TypeAdapter(Annotated[int, Field(ge=0)]),
    "leftovers": TypeAdapter(list[Leftover]), "disk": TypeAdapter(Disk),
    "ledger": TypeAdapter(Ledger), "budget": TypeAdapter(Budget),
    "human_evaluation": TypeAdapter(list[HumanEvaluation]),
    "profiles": TypeAdapter(list[Profile])}


def section_value(key: str, value: Any) -> Any:
    """A section's value, typed (key must be one of SECTION_KEYS)."""
    return _SECTION_ADAPTERS[key].validate_python(value)


def bundle_text(bundle: Bundle) -> str:
    """evidence.json's text: the bundle as JSON, two-space indented, keys sorted as the event
    log writes them."""
    return json.dumps(bundle.json_dict(), indent=2, sort_keys=True) + "\n"


# -- the published JSON Schema -------------------------------------------------------------------

SCHEMA_TITLE: Final = "Ref2VA evidence bundle (evidence/<run-id>/evidence.json)"


class _SchemaWithoutFieldTitles(GenerateJsonSchema):
    """Pydantic's schema without a title on every field (its name, capitalised: noise)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _one_line(node: Any) -> Any:
    """``node`` with every description on one line (docstrings keep their line breaks)."""
    if isinstance(node, dict):
        return {k: " ".join(v.split()) if k == "description" and isinstance(v, str)
                else _one_line(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_one_line(v) for v in node]
    return node


def _by_ref(node: Any, inline: Mapping[str, Any], ref: str) -> Any:
    """``node`` with every copy of ``inline`` replaced by a reference to ``ref``."""
    if node == inline:
        return {"$ref": ref}
    if isinstance(node, dict):
        return {k: _by_ref(v, inline, ref) for k, v in node.items()}
    if isinstance(node, list):
        return [_by_ref(v, inline, ref) for v in node]
    return node


def evidence_schema() -> dict[str, Any]:
    """The JSON Schema of evidence.json (draft 2020-12), generated from :class:`Bundle`.

    A check is validated against the vocabulary's names, statuses and reasons first (`check`),
    then against the one class its name selects, so that a misspelt name is said at the name.
    """
    schema = Bundle.model_json_schema(by_alias=True, mode="validation",
                                      schema_generator=_SchemaWithoutFieldTitles)
    defs: dict[str, Any] = schema["$defs"]
    checks = schema["properties"]["checks"]
    defs["AnyCheck"] = checks["items"]
    defs["check"] = {
        "description": "a check: its name, status and reason from the judge's vocabulary "
                       "(the check vocabulary, Check), then the data its name records",
        "allOf": [{"type": "object",
                   "required": ["track", "arm", "name", "status", "reason", "detail", "data"],
                   "properties": {"name": {"$ref": "#/$defs/Check"},
                                  "status": {"$ref": "#/$defs/CheckStatus"},
                                  "reason": {"anyOf": [{"$ref": "#/$defs/CheckReason"},
                                                       {"type": "null"}]}}},
                  {"$ref": "#/$defs/AnyCheck"}]}
    checks["items"] = {"$ref": "#/$defs/check"}
    schema = _one_line(_by_ref(schema, CHECK_REASON_SCHEMA, "#/$defs/CheckReason"))
    schema["$defs"]["CheckReason"] = CHECK_REASON_SCHEMA
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": SCHEMA_TITLE}
    order = ("description", "type", "additionalProperties", "required", "properties", "$defs")
    return head | {k: schema[k] for k in order} | {
        k: v for k, v in schema.items() if k not in (*order, "title")}


def schema_text() -> str:
    """The published schema file's text (src/ref2va_accept/schemas/evidence.schema.json)."""
    return json.dumps(evidence_schema(), indent=2, sort_keys=False) + "\n"


# -- the event log -------------------------------------------------------------------------------

class Event(Record):
    """One line of events.jsonl (evidence.EventLog.append): its number, time, kind and
    payload, which the kind's model reads (EVENT_MODELS, section_value)."""

    at: str
    data: Any
    event: str
    seq: int


class SectionEvent(Record):
    """The payload of a `section` event: which section, and its whole value."""

    key: str
    value: Any


def looks_like_bundle(data: Any) -> bool:
    """Whether parsed JSON says it is an evidence bundle (its `schema`), before it is read."""
    return isinstance(data, Mapping) and str(data.get("schema", "")).startswith(
        "ref2va-evidence/")


# A record's model per event kind (evidence.apply); sections and notes are handled there.
EVENT_MODELS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "campaign": TypeAdapter(Campaign | None).validate_python,
    "instance": Instance.model_validate,
    "audit": Cleanup.model_validate,
    "sample": Sample.model_validate,
    "media": Media.model_validate,
    "check": CHECK_ADAPTER.validate_python,
    "note": TypeAdapter(str).validate_python,
    "verdicts": TypeAdapter(list[TrackVerdict]).validate_python,
    "status": StatusChange.model_validate,
}
