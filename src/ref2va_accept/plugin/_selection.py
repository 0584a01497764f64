"""Campaign selection and parametrization: which campaign, which tracks and candidates, with
which marks, in which order.

Campaign tests ask for `track_id` (and `candidate_id`): they run once per track of the campaign
(and per candidate entering it), marked with the track's duration and quality class, so that
`-m "5s and lossless"` selects one track. Scenarios run in an explicit order: acceptance, then
quality, then perf, then profiling, then the verdicts, whatever their folders are called: the
cheapest decisive check first, since a candidate that fails its quality gate starts no latency
instance (latency_run.quality_stop).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ref2va_accept.arms import scenario_item
from ref2va_accept.campaign import TRACK_IDS, LoadedCampaign, duration_class, quality_class
from ref2va_accept.core import ArmRole, CampaignError, Ref2VAError
from ref2va_accept.judging import Baselines, LosslessGateRunner, LossyGateRunner
from ref2va_accept.planning import TrackPlan, baseline_groups, gate_groups, hosts_gate
from ref2va_accept.plugin._state import run_state

CAMPAIGN_ENV = "REF2VA_CAMPAIGN"
DEFAULT_CAMPAIGN = Path("fixtures/campaigns/reference.yaml")
# The scenario groups in the order they run: the quality gates before the latency protocol (a
# quality request or two decides what a latency protocol of hours would not change); anything
# else (the harness's own tests) keeps its place ahead of them, and the verdict scenarios run
# after every other item.
SCENARIO_ORDER = ("acceptance", "quality", "perf", "profile")
VERDICT_MARK = "verdict"
# Profiling scenarios, the warm-up demonstration and the host bring-up run only when -m names
# them (`-m "profile and 5s"`, `-m warmup_demonstration`, `-m bringup`).
PROFILE_MARK = "profile"
ASKED_FOR_BY_NAME = (PROFILE_MARK, "warmup_demonstration", "bringup")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ref2va", "Ref2VA acceptance campaign")
    group.addoption("--campaign", default=None, metavar="PATH",
                    help=f"campaign file (default: ${CAMPAIGN_ENV}, else {DEFAULT_CAMPAIGN})")
    group.addoption("--warmup-steps", default=None, type=int, metavar="N",
                    help="the warm-up demonstration's cheap warm-up: N denoising steps "
                    "(-m warmup_demonstration)")
    group.addoption("--order-seed", default=None, type=int, metavar="N",
                    help="order the latency instances by this seed instead of the campaign's "
                    "(or the one drawn for the run): replays an earlier run's order, which its "
                    "evidence records under campaign.order.seed")
    group.addoption("--no-localize", action="store_true", default=False,
                    help="skip the localization pass after a lossless candidate's bit-exact "
                    "failure (its requests are in `ref2va-accept plan`); `ref2va-accept "
                    "localize` runs it later from the evidence")


def campaign_path(config: pytest.Config) -> Path:
    """--campaign, else $REF2VA_CAMPAIGN (relative to the rootdir), else the reference one."""
    given = config.getoption("campaign")
    if given:
        return Path(given).resolve()
    from_env = os.environ.get(CAMPAIGN_ENV)
    if from_env:
        # A relative path in the environment is taken from the rootdir, so a host's shell
        # profile works from any folder of the checkout.
        path = Path(from_env)
        return path if path.is_absolute() else (config.rootpath / path)
    return config.rootpath / DEFAULT_CAMPAIGN


def is_campaign_item(item: pytest.Item) -> bool:
    """A scenario run against the campaign (parametrized by track), not a harness self-test."""
    return "track_id" in getattr(item, "fixturenames", ())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Campaign tests run once per track (and per candidate entering it), with its marks.

    A test module may set `TRACK_CLASS = "lossless"` (or "lossy") to run on those tracks only.
    """
    if "track_id" not in metafunc.fixturenames:
        return
    state = run_state(metafunc.config)
    try:
        campaign = state.campaign
    except Ref2VAError:
        # Left unparametrized: the session stops once collection is over, with the error said
        # once (`pytest_collection_modifyitems`), not once per scenario module.
        return
    wanted = getattr(metafunc.module, "TRACK_CLASS", None)
    track_ids = [t for t in TRACK_IDS if t in campaign.model.tracks
                 and (wanted is None or quality_class(t) == wanted)]

    def marks(track_id: str) -> list[pytest.MarkDecorator]:
        return [getattr(pytest.mark, duration_class(track_id)),
                getattr(pytest.mark, quality_class(track_id))]

    if "candidate_id" in metafunc.fixturenames:
        metafunc.parametrize(("track_id", "candidate_id"), [
            pytest.param(t, arm.id, id=f"{t}:{arm.id}", marks=marks(t))
            for t in track_ids for arm in campaign.arms_for(t) if arm.id != ArmRole.B0
        ])
    else:
        metafunc.parametrize("track_id", [pytest.param(t, id=t, marks=marks(t))
                                          for t in track_ids])


def scenario_rank(item: pytest.Item) -> int:
    """Where an item's group runs: the harness's own tests (0), acceptance, quality, perf,
    profile, and the verdict scenarios last, since they judge from every check recorded before
    them."""
    if item.get_closest_marker(VERDICT_MARK) is not None:
        return len(SCENARIO_ORDER) + 1
    for rank, mark in enumerate(SCENARIO_ORDER, start=1):
        if item.get_closest_marker(mark) is not None:
            return rank
    return 0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Before deselection (-m, -k) and before any trylast hook (live progress plans the order it
    # finds). sort() is stable: within a group the collection order stays.
    if any(is_campaign_item(item) for item in items):
        require_campaign(config)
    items.sort(key=scenario_rank)
    # Profiling and the warm-up demonstration are asked for by name: `pytest -m "lossy and 15s"`
    # on the host must not add instances and requests (hours there) that no verdict reads.
    for mark in ASKED_FOR_BY_NAME:
        if mark in (config.getoption("markexpr", "") or ""):
            continue
        unasked = [item for item in items if item.get_closest_marker(mark)]
        if unasked:
            config.hook.pytest_deselected(items=unasked)
            items[:] = [item for item in items if not item.get_closest_marker(mark)]


def pytest_collection_finish(session: pytest.Session) -> None:
    # After deselection: a track's latency schedule covers the candidates whose perf scenario
    # this session runs (with a shared B0 they are interleaved in one schedule).
    covered: dict[str, list[str]] = {}
    gated: list[str] = []  # tracks with a quality scenario (each needs B0's gate instances)
    judged: set[tuple[str, str]] = set()  # (track, candidate) with a quality scenario
    for item in session.items:
        scenario = scenario_item(item)
        if (item.get_closest_marker("perf") is not None and scenario.track is not None
                and scenario.candidate is not None):
            covered.setdefault(scenario.track, []).append(scenario.candidate)
        if item.get_closest_marker("quality") is not None and scenario.track is not None:
            gated.append(scenario.track)
            if scenario.candidate is not None:
                judged.add((scenario.track, scenario.candidate))
    if not gated and not covered:
        return
    state = run_state(session.config)
    if gated:
        # Tracks whose B0 gates ask the same request share one pair of B0 gate instances.
        state.gate_instances.share(gate_groups(state.plans), state.plans, gated)
    if covered:
        for track_id, candidates in covered.items():
            state.latency.cover(track_id, candidates)
        # Tracks whose B0 is the same server asked the same timed request share its instances.
        state.latency.share(baseline_groups(state.plans), state.plans)
        # A candidate measured and judged in this session has its gate on its first latency
        # instance (run_plan.hosts_gate says where).
        hosted = {(t, c) for t, cs in covered.items() for c in cs
                  if (t, c) in judged and hosts_gate(state.plans[t])}
        baselines = state.baselines
        state.latency.host(hosted, lambda plan, candidate: gate_runner(plan, baselines)
                           .host(candidate),
                           lambda arms: gate_runner(arms.plan, baselines).prepare(arms))


def gate_runner(plan: TrackPlan, baselines: Baselines) -> LosslessGateRunner | LossyGateRunner:
    """The track's quality gate as the scenarios run it (the lossy gate imports its scorers,
    OpenCV and SciPy, only when it scores)."""
    if plan.quality == "lossless":
        return LosslessGateRunner(baselines)
    return LossyGateRunner(baselines)


def require_campaign(config: pytest.Config) -> None:
    """A session with campaign scenarios needs its campaign, its plans and its lock to load.

    Any of them failing ends the session here, once, as a usage error (pytest prints
    `ERROR: <message>` and exits 4): no scenario runs, and no hook, fixture or report repeats the
    error. A session of the harness's own tests never asks, so a broken $REF2VA_CAMPAIGN cannot
    stop it.
    """
    state = run_state(config)
    try:
        state.campaign  # noqa: B018 - each property loads and keeps what it reads
        state.plans  # noqa: B018
        state.freeze  # noqa: B018
    except Ref2VAError as exc:
        state.unusable = str(exc)  # so that collection's end asks for no report
        said = str(exc)
        raise pytest.UsageError("ref2va: cannot use the campaign:"
                                + ("\n" if "\n" in said else " ") + said) from None


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def campaign(pytestconfig: pytest.Config) -> LoadedCampaign:
    """The campaign this run judges (--campaign, $REF2VA_CAMPAIGN, or the reference campaign)."""
    try:
        return run_state(pytestconfig).campaign
    except CampaignError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def track(pytestconfig: pytest.Config, track_id: str) -> TrackPlan:
    """This test's track, as its frozen plan."""
    return run_state(pytestconfig).plans[track_id]
