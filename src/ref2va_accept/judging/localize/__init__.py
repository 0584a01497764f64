"""The localization pass: on a bit-exact failure, the first module where a lossless candidate
parts from B0 (_runner.py), read from the engines' capture logs (_capture.py), named only from calls
captured in both arms (_judgement.py), its result and target (_result.py), with a picture of where
the named module's output differs (_picture.py); ``ref2va-accept localize`` (cli) runs it again
from a finished run's evidence."""

from ref2va_accept.judging.localize._capture import Call, Digest, Divergence, divergence, read_log
from ref2va_accept.judging.localize._picture import diff_map, svg
from ref2va_accept.judging.localize._price import pass_cost
from ref2va_accept.judging.localize._result import Localization, Target, target_of
from ref2va_accept.judging.localize._runner import (
    LocalizationPass,
    equal_before,
    failed_gate,
    localize,
    wants_pass,
)

__all__ = [
    "Call",
    "Digest",
    "Divergence",
    "Localization",
    "LocalizationPass",
    "Target",
    "diff_map",
    "divergence",
    "equal_before",
    "failed_gate",
    "localize",
    "pass_cost",
    "read_log",
    "svg",
    "target_of",
    "wants_pass",
]
