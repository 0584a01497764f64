"""Reporting: live progress of the requests, the HTML report of a campaign run (pytest-html, in
evidence/<run-id>/report.html, verdicts first) and the verdict table in the terminal summary.

The HTML report is asked of pytest-html once collection shows a campaign scenario, the way
`--html PATH --self-contained-html` would have asked for it: a session of the harness's own tests
gets no report and no run folder. A `--html` given by the user is left alone.
"""

from __future__ import annotations

import contextlib
import platform
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

import pytest
from pytest_html.basereport import BaseReport

from ref2va_accept import __version__
from ref2va_accept.arms import PLUGIN_NAME as PROGRESS_PLUGIN
from ref2va_accept.arms import ProgressPlugin
from ref2va_accept.core import CheckStatus, WriteFailed, atomic_write
from ref2va_accept.evidence import WRITE_FAILED, EvidenceBundle, package_versions
from ref2va_accept.plugin._selection import is_campaign_item
from ref2va_accept.plugin._state import STATE, run_state

PLUGIN_NAME = "ref2va-report"
HTML_PLUGIN = "html"  # pytest-html's plugin name
REPORT_FILE = "report.html"


@dataclass(eq=False)  # a plugin object: hashed by identity
class HtmlReportRequest:
    """Asks pytest-html for the run's report once a campaign scenario is collected."""

    config: pytest.Config
    collect_failures: list[pytest.CollectReport] = field(default_factory=list)
    report: BaseReport | None = None

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # replayed to the report if there is one (it records these itself)
            self.collect_failures.append(report)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        config = self.config
        html = config.pluginmanager.get_plugin(HTML_PLUGIN)
        # Collection's end comes even when collection stopped on an unusable campaign.
        if (html is None or config.getoption("htmlpath", None) or config.option.collectonly
                or run_state(config).unusable is not None
                or not any(is_campaign_item(item) for item in session.items)):
            return
        state = run_state(config)
        config.option.htmlpath = str(state.run_folder / REPORT_FILE)
        config.option.self_contained_html = True
        # pytest-html's own configure builds and registers its report for these options, as if
        # they had been given on the command line; the report then catches up on the session's
        # start and collection, which happened before anyone knew it was a campaign run.
        html.pytest_configure(config)
        self.report = next(p for p in config.pluginmanager.get_plugins()
                           if isinstance(p, BaseReport))
        # pytest-html writes straight into report.html: a full disk would leave half a report
        # and a traceback. Written atomically instead, with a short report when it does not fit.
        self.report._write_report = self._write_report
        metadata = _metadata(config)
        if metadata is not None:
            pytest_metadata(metadata, config)
            metadata["Campaign"] = state.campaign.model.name
        self.report.pytest_sessionstart(session)
        for failure in self.collect_failures:
            self.report.pytest_collectreport(failure)
        self.report.pytest_collection_finish(session)


    def _write_report(self, rendered: str) -> None:
        """report.html through a temporary file; when it cannot be written, the short report
        (status, the failed write, the verdict table) in its place, and the run failed_write."""
        state = run_state(self.config)
        path = state.run_folder / REPORT_FILE
        try:
            atomic_write(path, rendered)
            return
        except WriteFailed as exc:
            failure = exc
        bundle = state.bundle
        if bundle is None:
            state.say_failure(failure)
            return
        bundle.fail_late(failure)
        with contextlib.suppress(WriteFailed):
            atomic_write(path, short_report(bundle))


def short_report(bundle: EvidenceBundle) -> str:
    """The report that fits when the full one did not: the run's status, its failed writes and
    the verdict table, as plain HTML (no media, no per-request tables, no script)."""
    rows = "".join(
        f"<tr><td>{escape(v.track)}</td><td>{escape(v.candidate or '(none)')}</td>"
        f"<td>{escape(' '.join(filter(None, (v.verdict, v.stand_in_label))))}</td>"
        f"<td>{escape(', '.join(v.reasons))}</td>"
        f"<td>{escape(', '.join(v.open_checks))}</td></tr>" for v in bundle.verdicts)
    failures = "".join(f"<li>{escape(bundle.sanitizer.text(str(f)))}</li>"
                       for f in bundle.failures)
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Ref2VA acceptance report"
            " (short)</title></head><body><h1>Ref2VA acceptance report (short)</h1>"
            f"<p>run {escape(bundle.run_id)}: status <b>{escape(bundle.status)}</b>. The full "
            "report could not be written; evidence.json and events.jsonl hold what was "
            f"recorded.</p><ul>{failures}</ul><h2>Verdicts per track</h2><table><tr><th>track"
            "</th><th>candidate</th><th>verdict</th><th>reasons</th><th>open checks</th></tr>"
            f"{rows}</table></body></html>\n")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    # Live progress of the requests (arms/_progress.py); silent unless a campaign scenario is
    # collected.
    config.pluginmanager.register(
        ProgressPlugin(config, lambda: run_state(config).campaign, lambda: run_state(config).plans),
        PROGRESS_PLUGIN)
    config.pluginmanager.register(HtmlReportRequest(config), PLUGIN_NAME)


ENVIRONMENT_ALLOWLIST = ("Python", "Platform", "Packages", "Plugins")


def _metadata(config: pytest.Config) -> MutableMapping[str, Any] | None:
    try:
        from pytest_metadata.plugin import metadata_key  # noqa: PLC0415
    except ImportError:
        return None
    return config.stash.get(metadata_key, None)


@pytest.hookimpl(optionalhook=True)
def pytest_metadata(metadata: MutableMapping[str, Any], config: pytest.Config) -> None:
    """The report's environment table: an allowlist, not the environment.

    pytest-metadata fills it with every CI variable it knows (GIT_URL with its token, NODE_NAME,
    BUILD_URL, WORKSPACE...); the report keeps the interpreter, the platform, package and plugin
    versions, the harness's version and (once known) the campaign's name. Changed in place, so
    that what an xdist worker sends back is the same allowlist.
    """
    kept = {key: metadata[key] for key in ENVIRONMENT_ALLOWLIST if key in metadata}
    kept.setdefault("Python", platform.python_version())
    kept.setdefault("Platform", platform.platform())
    packages = dict(kept.get("Packages") or {})
    packages.update({name: version for name, version in package_versions().items() if version})
    kept["Packages"] = packages
    kept["ref2va-accept"] = __version__
    metadata.clear()
    metadata.update(kept)


@pytest.hookimpl(optionalhook=True)
def pytest_html_report_title(report: Any) -> None:
    report.title = "Ref2VA acceptance report"


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_summary(prefix: list[str], summary: list[str], postfix: list[str],
                                session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or state.bundle is None:
        return
    # Imported here: rendering the gates' evidence is only needed once a report is written.
    from ref2va_accept.report import summary_html  # noqa: PLC0415

    prefix.insert(0, summary_html(state.bundle))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or state.bundle is None:
        return
    tr = terminalreporter
    tr.write_sep("=", "Ref2VA verdicts per track")
    for v in state.bundle.verdicts:
        reasons = ", ".join(v.reasons)
        opened = f" open: {', '.join(v.open_checks)}" if v.open_checks else ""
        unchecked = [c for c, status in v.checks.items()
                     if status == CheckStatus.NOT_APPLICABLE]
        skipped = f" not applicable: {', '.join(unchecked)}" if unchecked else ""
        label = f" {v.stand_in_label}" if v.stand_in_label else ""
        where = f" first divergence: {v.localized}" if v.localized else ""
        tr.write_line(f"{v.track:13} {v.candidate or '(none)':20} {v.verdict.upper():13} "
                      f"{reasons}{opened}{skipped}{label}{where}")
    if state.bundle.status == WRITE_FAILED:
        for failure in state.bundle.failures:
            tr.write_line(f"ref2va: status {WRITE_FAILED}: {state.failure_line(failure)}")
    tr.write_line(f"evidence: {state.display(state.bundle.folder)}/evidence.json")
