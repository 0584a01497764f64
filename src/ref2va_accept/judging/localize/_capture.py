"""A capture log (``capture.jsonl``, written by the engine) read and two of them compared.

Each line is one call of a hooked module, in the order the calls completed: its denoising step,
its path in the model, its call index at that step, and each input and output tensor's shape,
dtype and sha256 (and, when the request asked for tensors, the file holding it). Two runs are
compared call by call in B0's order (steps in order, when the capture spans several):
the first call whose outputs differ (or that ran in one run only) is where they part. Equal
digests are equal bytes, so a module whose inputs are equal and whose outputs are not is the
module that broke; one whose inputs already differ was fed the divergence by code that is not a
module of its own, run after the module before it.

Calls B0 made and the candidate did not are "not run" only where the candidate's capture is seen
live around them: it recorded a call after them (so it did not stop early) and at least one call
at each of their steps (so its hooks fired there). Otherwise they are ``uncovered``: the capture
cannot tell a module the candidate skipped from a call its hooks never saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.core import LocalizeError
from ref2va_accept.evidence import DivergenceKind
from ref2va_contract.diagnostics import CAPTURE_LOG_FILE


@dataclass(frozen=True)
class Digest:
    shape: tuple[int, ...]
    dtype: str
    sha256: str
    file: str | None = None

    def describe(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


@dataclass(frozen=True)
class Call:
    index: int
    module: str
    call: int  # the module's call index at its step
    inputs: tuple[Digest, ...]
    outputs: tuple[Digest, ...]
    step: int | None = None  # the denoising step (None: the encoders)

    @property
    def key(self) -> tuple[int, str, int]:
        return -1 if self.step is None else self.step, self.module, self.call

    @property
    def label(self) -> str:
        return self.module if self.call == 0 else f"{self.module} (call {self.call})"


def _digests(raw: Any, where: str) -> tuple[Digest, ...]:
    if not isinstance(raw, list):
        raise LocalizeError(f"{where}: expected a list of tensors, got {type(raw).__name__}")
    found = []
    for entry in raw:
        try:
            found.append(Digest(tuple(int(n) for n in entry["shape"]), str(entry["dtype"]),
                                str(entry["sha256"]), entry.get("file")))
        except (KeyError, TypeError, ValueError) as exc:
            raise LocalizeError(f"{where}: malformed tensor entry {entry!r} ({exc})") from None
    return tuple(found)


def read_log(folder: Path) -> list[Call]:
    """Every call of a capture folder's log, in completion order; one error naming file:line."""
    path = folder / CAPTURE_LOG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LocalizeError(f"{path.name}: cannot read the capture log in {folder.name}: "
                            f"{exc.strerror or exc}") from None
    calls: list[Call] = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{folder.name}/{CAPTURE_LOG_FILE}:{number}"
        try:
            raw = json.loads(line)
            step = raw.get("step")
            calls.append(Call(int(raw["index"]), str(raw["module"]), int(raw["call"]),
                              _digests(raw["inputs"], where), _digests(raw["outputs"], where),
                              None if step is None else int(step)))
        except (ValueError, KeyError, TypeError) as exc:
            raise LocalizeError(f"{where}: not a capture line ({exc})") from None
    return calls


@dataclass(frozen=True)
class Divergence:
    """Where the candidate's capture log first parts from B0's: the first call that differs,
    was not run, or runs out of order (``none``: every call equal, in the same order)."""

    kind: DivergenceKind
    b0: Call | None  # B0's call at the parting (None: only in the candidate)
    candidate: Call | None
    before: Call | None  # the last call equal in both before it
    output: int | None = None  # which output differs first (differs / inputs_differ)
    skipped: tuple[str, ...] = ()  # not_run, uncovered: B0's calls the candidate did not make
    # uncovered: why the candidate's capture cannot say they did not run
    unseen: str = ""

    @property
    def module(self) -> str | None:
        call = self.b0 or self.candidate
        return None if call is None else call.module

    @property
    def step(self) -> int | None:
        """The denoising step where the runs part (None: the encoders, or nowhere)."""
        call = self.b0 or self.candidate
        return None if call is None else call.step

    def _span(self, *, counted: bool = False) -> str:
        span = self.skipped
        if len(span) == 1:
            return span[0]
        return f"{span[0]} .. {span[-1]}" + (f" ({len(span)} calls)" if counted else "")

    def where(self, before: Call | None = None) -> str:
        """The place in a few words (the verdict row and the ledger show it); ``before``: the
        last equal call of the enclosing level, when this level's parting has none."""
        first = self.before or before
        if self.kind == "differs":
            return str(self.module)
        if self.kind == "inputs_differ":
            return f"code between {first.label if first else 'the start'} and {self.module}"
        if self.kind == "not_run":
            return f"{self._span()} not run"
        if self.kind == "uncovered":
            return f"{self._span()} not in the candidate's capture"
        if self.kind == "only_in_candidate":
            return f"{self.module} run by the candidate only"
        if self.kind == "order":
            return f"calls reordered at {self.module}"
        return "code after every hooked module"

    def sentence(self) -> str:
        b0, cand, before = self.b0, self.candidate, self.before
        after = f" (after {before.label})" if before else ""
        if self.kind == "differs" and b0 is not None:
            out = b0.outputs[self.output or 0]
            return (f"{b0.label}: inputs equal, output {self.output or 0} ({out.describe()}) "
                    "differs")
        if self.kind == "inputs_differ" and b0 is not None:
            # what was seen, no more: where its inputs came from is the next level's to say
            seen = (f"every hooked call before it equal, up to {before.label}" if before
                    else "the first call captured")
            return f"{b0.label}: its inputs already differ ({seen})"
        if self.kind == "not_run" and b0 is not None:
            return (f"{self._span(counted=True)} ran in B0 but not in the candidate{after}: the "
                    "candidate did not compute them (outputs reused from an earlier step, or "
                    "skipped)")
        if self.kind == "uncovered" and b0 is not None:
            return (f"B0 ran {self._span(counted=True)}{after}; the candidate's capture has no "
                    f"call of them and {self.unseen}: whether the candidate ran them cannot be "
                    "told")
        if self.kind == "only_in_candidate" and cand is not None:
            return f"{cand.label} ran in the candidate only{after}"
        if self.kind == "order" and b0 is not None and cand is not None:
            return f"the calls run in another order{after}: B0 ran {b0.label}, the candidate " \
                   f"{cand.label}"
        return "every hooked module's output is equal in both runs"


def differing_output(a: Call, b: Call) -> int | None:
    """The first of two calls' outputs that differ (None: every output equal)."""
    if len(a.outputs) != len(b.outputs):
        return 0
    for i, (x, y) in enumerate(zip(a.outputs, b.outputs, strict=True)):
        if (x.sha256, x.shape, x.dtype) != (y.sha256, y.shape, y.dtype):
            return i
    return None


def _same_inputs(a: Call, b: Call) -> bool:
    return [(d.sha256, d.shape, d.dtype) for d in a.inputs] == \
        [(d.sha256, d.shape, d.dtype) for d in b.inputs]


def _step_name(step: int | None) -> str:
    return "the encoders" if step is None else f"step {step}"


def _unseen(span: list[Call], to_the_end: bool, candidate: list[Call]) -> str:
    """Why the candidate's capture cannot say it did not run B0's ``span`` ("" when it can):
    it must have recorded one of B0's calls after the span, and a call at each of its steps."""
    if not candidate:
        return "recorded no call at all"
    if to_the_end:
        return (f"recorded none of B0's later calls (its last call is {candidate[-1].label} at "
                f"{_step_name(candidate[-1].step)}: it may have stopped early)")
    recorded = {c.step for c in candidate}
    missing = [s for s in dict.fromkeys(c.step for c in span) if s not in recorded]
    if missing:
        return (f"recorded no call at {', '.join(map(_step_name, missing))} (its hooks may not "
                "have fired there)")
    return ""


def divergence(b0: list[Call], candidate: list[Call]) -> Divergence:
    """The first place, in B0's completion order, where the candidate's calls part from B0's."""
    theirs = {call.key: call for call in candidate}
    ours = {call.key for call in b0}
    before: Call | None = None
    position = 0  # the next candidate call expected
    for i, call in enumerate(b0):
        other = theirs.get(call.key)
        if other is None:
            span = []
            for later in b0[i:]:
                if later.key in theirs:
                    break
                span.append(later)
            skipped = tuple(c.label for c in span)
            unseen = _unseen(span, i + len(span) == len(b0), candidate)
            if unseen:
                return Divergence("uncovered", call, None, before, skipped=skipped, unseen=unseen)
            return Divergence("not_run", call, None, before, skipped=skipped)
        # A candidate call made before this one that B0 never made: it ran in the candidate only.
        if position < len(candidate) and candidate[position].key not in ours:
            return Divergence("only_in_candidate", None, candidate[position], before)
        if position < len(candidate) and candidate[position].key != call.key:
            return Divergence("order", call, candidate[position], before)
        position += 1
        differing = differing_output(call, other)
        if differing is not None:
            kind: DivergenceKind = "differs" if _same_inputs(call, other) else "inputs_differ"
            return Divergence(kind, call, other, before, differing)
        before = call
    if position < len(candidate):
        return Divergence("only_in_candidate", None, candidate[position], before)
    return Divergence("none", None, None, before)
