"""The host bring-up: `ref2va-accept bringup CAMPAIGN`, run once on a fresh host before freezing.

It answers every guess made without the host and every risk read in upstream's code with a row
(confirmed, contradicted, measured or not checked), writes `bringup.html` and `bringup.json`, and
turns what it measured into a patch of the campaign. `step_schedule` lists and prices what it does,
so `plan` can show its cost before it runs.
"""

from __future__ import annotations

from ref2va_accept.bringup._cost import BringupCost, price
from ref2va_accept.bringup._rows import QUESTION_IDS, QUESTIONS
from ref2va_accept.bringup._runner import BringupResult, run_bringup, summary_lines
from ref2va_accept.bringup._step_schedule import BringupSchedule, step_schedule

__all__ = ["QUESTIONS", "QUESTION_IDS", "BringupCost", "BringupResult", "BringupSchedule", "price",
           "run_bringup", "step_schedule", "summary_lines"]
