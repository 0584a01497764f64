"""The report's "First divergence" panels: one per lossless candidate that was not bit-exact,
from its ``localization`` check (localize/), with the picture of where the output differs."""

from __future__ import annotations

import html
from typing import Any

from ref2va_accept.core import CheckStatus
from ref2va_accept.evidence import (
    AnyCheck,
    Bundle,
    EvidenceBundle,
    LocalizationCheck,
    LocalizedFigures,
)
from ref2va_accept.judging.localize import svg


def _figure_rows(figures: LocalizedFigures) -> str:
    fraction: Any = figures.fraction
    if isinstance(fraction, int | float):
        fraction = f"{100 * fraction:.4g}%"
    labelled = (("output", figures.name), ("dtype", figures.dtype_a),
                ("shape", figures.shape_a), ("elements differing", figures.differing),
                ("of", figures.elements), ("share differing", fraction),
                ("first at", figures.first_index), ("largest |diff|", figures.max_abs_diff),
                ("largest ULP", figures.max_ulp))
    return "".join(f"<tr><th>{label}</th><td>{html.escape(str(value))}</td></tr>"
                   for label, value in labelled)


def localization_check(check: AnyCheck) -> LocalizationCheck:
    """A localization check, as it is (a ValueError naming the check when it is another)."""
    if not isinstance(check, LocalizationCheck):
        raise ValueError(f"{check.track}/{check.arm}: a {check.name} check is not a "
                         "localization check")
    return check


def panel(check: AnyCheck) -> str:
    """One candidate's panel (the report's, and localize.html's of ``ref2va-accept localize``)."""
    check = localization_check(check)
    data = check.data
    named = check.status == CheckStatus.PASS
    where = data.where or data.module or "-"
    # open: no place is named; what the pass got to (a block not reproduced, a range not seen)
    # follows, and the sentence says why
    head = (f"<b>{html.escape(str(where))}</b>" if named else
            "<b>no place named</b>" + (f": {html.escape(data.where)}," if data.where else ""))
    steps = ""
    if data.step is not None:
        steps = (f" at steps {data.first_step}..{data.step}"
                 if data.first_step is not None and data.first_step != data.step
                 else f" at step {data.step}")
    parts = [
        f"<div class='ref2va-localization'><h4>{html.escape(check.track)} / "
        f"{html.escape(check.arm)}: first divergence {'NAMED' if named else 'OPEN'}</h4>",
        f"<p>{head}{html.escape(steps)} (first diverging point {html.escape(str(data.point))}, "
        f"seed {html.escape(str(data.seed))})</p>",
        f"<p>{html.escape(str(data.sentence or check.detail or ''))}</p>",
    ]
    if data.inputs_equal is not None:
        parts.append("<p>inputs to it: " + ("equal in both runs (same sha256)"
                                            if data.inputs_equal else "already differ")
                     + "</p>")
    if data.level1 is not None and data.level2 is not None:  # else the sentence above is level 1's
        parts.append(f"<p>blocks first: {html.escape(str(data.level1.sentence))}</p>")
    if isinstance(data.figures, LocalizedFigures):
        parts.append("<table border='1' cellpadding='3' style='border-collapse:collapse'>"
                     + _figure_rows(data.figures) + "</table>")
    if data.picture is not None:
        parts.append(f"<p>where it differs: {html.escape(str(data.picture_of))}; rows "
                     "are every axis but the last (tokens, frames x positions), columns the "
                     "last (features, channels)</p>" + svg(data.picture,
                                                           rows_label="rows",
                                                           cols_label="columns"))
    parts.append("</div>")
    return "".join(parts)


def localization_html(bundle: EvidenceBundle | Bundle) -> str:
    record = bundle.record if isinstance(bundle, EvidenceBundle) else bundle
    panels = [panel(c) for c in record.checks_of(LocalizationCheck)]
    if not panels:
        return ""
    return ("<h3>First divergence (lossless candidates that are not bit-exact)</h3>"
            + "".join(panels))
