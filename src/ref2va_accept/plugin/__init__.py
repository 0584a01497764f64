"""The harness's pytest plugin, one module per concern, each with its own hooks and fixtures:

  _selection     the campaign (--campaign, $REF2VA_CAMPAIGN), per-track parametrization and
                 marks, the scenario order (acceptance, quality, perf, profile, verdicts last;
                 profile only when -m names it), the candidates each track's latency schedule
                 covers, `campaign`, `track`
  _engines       the session's engine registry (in `config.stash`), `arms`, `baselines`,
                 `latency_schedules`, SIGTERM
  _run_evidence  the run state, the `evidence` bundle, `track_verdict`, checkpoints, the run's
                 end (verdicts, status, the campaign's ledger, scrub, `latest`)
  _reporting     live progress, the HTML report of a campaign run, the terminal verdict table

`_state` holds what they share (the RunState in the stash). The root conftest.py loads this
package (`pytest_plugins`), which loads the four modules.
"""

from __future__ import annotations

from ref2va_accept.judging import Baselines

__all__ = ["Baselines"]

pytest_plugins = [
    "ref2va_accept.plugin._selection",
    "ref2va_accept.plugin._engines",
    "ref2va_accept.plugin._run_evidence",
    "ref2va_accept.plugin._reporting",
]
