"""The report's "First divergence" panels: one per lossless candidate that was not bit-exact,
from its ``localization`` check (localize/), with the picture of where the output differs."""

from __future__ import annotations

import html
from typing import Any

from .evidence import EvidenceBundle
from .localize.picture import DiffMap, svg


def _figure_rows(figures: dict[str, Any]) -> str:
    labels = (("output", "name"), ("dtype", "dtype_a"), ("shape", "shape_a"),
              ("elements differing", "differing"), ("of", "elements"),
              ("share differing", "fraction"), ("first at", "first_index"),
              ("largest |diff|", "max_abs_diff"), ("largest ULP", "max_ulp"))
    rows = []
    for label, key in labels:
        value = figures.get(key)
        if key == "fraction" and isinstance(value, int | float):
            value = f"{100 * value:.4g}%"
        rows.append(f"<tr><th>{label}</th><td>{html.escape(str(value))}</td></tr>")
    return "".join(rows)


def panel(check: dict[str, Any]) -> str:
    data = check.get("data") or {}
    status = "NAMED" if check["status"] == "pass" else "OPEN"
    where = data.get("where") or data.get("module") or "-"
    step = data.get("step")
    parts = [
        f"<div class='ref2va-localization'><h4>{html.escape(check['track'])} / "
        f"{html.escape(check['arm'])}: first divergence {status}</h4>",
        f"<p><b>{html.escape(str(where))}</b>"
        + (f" at step {html.escape(str(step))}" if step is not None else "")
        + f" (first diverging point {html.escape(str(data.get('point')))}, seed "
        f"{html.escape(str(data.get('seed')))})</p>",
        f"<p>{html.escape(str(data.get('sentence') or check.get('detail') or ''))}</p>",
    ]
    if data.get("inputs_equal") is not None:
        parts.append("<p>inputs to it: " + ("equal in both runs (same sha256)"
                                            if data["inputs_equal"] else "already differ")
                     + "</p>")
    level1 = data.get("level1") or {}
    if level1 and data.get("level2"):  # else the sentence above is level 1's
        parts.append(f"<p>blocks first: {html.escape(str(level1.get('sentence')))}</p>")
    figures = data.get("figures")
    if isinstance(figures, dict) and "error" not in figures:
        parts.append("<table border='1' cellpadding='3' style='border-collapse:collapse'>"
                     + _figure_rows(figures) + "</table>")
    picture = data.get("picture")
    if isinstance(picture, dict):
        shown = DiffMap.from_dict(picture)
        parts.append(f"<p>where it differs: {html.escape(str(data.get('picture_of')))}; rows "
                     "are every axis but the last (tokens, frames x positions), columns the "
                     "last (features, channels)</p>" + svg(shown, rows_label="rows",
                                                           cols_label="columns"))
    parts.append("</div>")
    return "".join(parts)


def localization_html(bundle: EvidenceBundle) -> str:
    panels = [panel(c) for c in bundle.data["checks"] if c["name"] == "localization"]
    if not panels:
        return ""
    return ("<h3>First divergence (lossless candidates that are not bit-exact)</h3>"
            + "".join(panels))
