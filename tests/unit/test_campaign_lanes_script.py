"""`./ref2va campaign` in lanes: a pytest session per lane, at once, each pinned to CPUs of its
own and named <run>-laneN, merged with `merge --lanes`; the first failure is the exit code.

The script runs in a stand-in checkout whose pytest and ref2va-accept only record how they were
called and exit as told, so that what is tested is the script's own logic (the lanes' split,
merge and --run-id are tested with the real code in test_lanes.py, test_merge.py and
test_run_id.py)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.suite_runner import ROOT, sigterm_when

SCENARIOS = "acceptance or quality or perf or verdict"
LANES = ["5s-lossy,15s-lossless\t(5s and lossy) or (15s and lossless)",
         "5s-lossless,15s-lossy\t(5s and lossless) or (15s and lossy)"]


def _checkout(tmp_path: Path, *, lane_codes: tuple[int, int] = (0, 0), plan: int = 0,
              merge: int = 0) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "ref2va", tmp_path / "ref2va")
    shutil.copy(ROOT / "scripts/cpu_affinity.py", tmp_path / "scripts/cpu_affinity.py")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    digest = hashlib.sha256((tmp_path / "pyproject.toml").read_bytes()).hexdigest()[:16]
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (tmp_path / ".venv" / f".installed-{digest}").touch()
    calls = tmp_path / "calls.log"
    # pytest: one line per session (its arguments and the CPUs it may run on), its exit code
    # by the lane it runs; anything else is the real interpreter (cpu_affinity.py, nproc). The
    # script starts pytest through a line of Python that restores SIGINT (-c CODE -m pytest):
    # that line is the script's, not the session's (tests/unit/test_signals.py runs it).
    (venv / "python").write_text(f"""#!/bin/sh
if [ "$1" = -c ] && [ "$3" = -m ] && [ "$4" = pytest ]; then shift 2; fi
if [ "$1" = -m ] && [ "$2" = pytest ]; then
    cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
    echo "pytest cpus=$cpus $*" >>'{calls}'
    case "$*" in
        *-lane1*) exit {lane_codes[0]} ;;
        *-lane2*) exit {lane_codes[1]} ;;
    esac
    exit 0
fi
exec '{sys.executable}' "$@"
""")
    lanes = "\\n".join(LANES)
    (venv / "ref2va-accept").write_text(f"""#!/bin/sh
# The set-up's stand-in check (scorers standins --campaign): all pinned, not logged.
if [ "$1" = scorers ]; then exit 0; fi
echo "ref2va-accept $*" >>'{calls}'
case "$1" in
    lanes) if [ "$4" = 1 ]; then printf '%s\\n' 'all\t(5s)'; else printf '{lanes}\\n'; fi ;;
    plan) exit {plan} ;;
    merge) exit {merge} ;;
esac
""")
    for tool in ("python", "ref2va-accept"):
        (venv / tool).chmod(0o755)
    return tmp_path


def _campaign(checkout: Path, *args: str, **env: str) -> tuple[int, str, list[str]]:
    # Two lanes whatever CPUs this test may use (the selftest pins its workers to one CPU
    # at times); a test below leaves the count to the script.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("REF2VA_")}
    environ["REF2VA_CAMPAIGN_LANES"] = "2"
    result = subprocess.run(["bash", str(checkout / "ref2va"), "campaign", *args],
                            capture_output=True, text=True, timeout=60,
                            env={**environ, "PYTHON": sys.executable, **env})
    log = checkout / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    return result.returncode, result.stderr + result.stdout, calls


needs_taskset = pytest.mark.skipif(
    shutil.which("taskset") is None,
    reason="lanes need taskset (util-linux); without it the campaign is one session")


@needs_taskset
def test_no_arguments_run_a_session_per_lane_pinned_apart_then_merge(tmp_path: Path) -> None:
    code, said, calls = _campaign(_checkout(tmp_path))
    assert code == 0, said
    assert calls[0].startswith("ref2va-accept lanes fixtures/campaigns/reference.yaml --count ")
    assert calls[1] == "ref2va-accept plan fixtures/campaigns/reference.yaml"
    sessions = [c for c in calls if c.startswith("pytest ")]
    assert len(sessions) == 2
    ids, cpus = [], []
    for number, (session, lane) in enumerate(zip(sorted(sessions, key=lambda s: "lane2" in s),
                                                 LANES, strict=True), start=1):
        marks = lane.split("\t")[1]
        assert f"tests -m ({SCENARIOS}) and ({marks}) --run-id " in session
        found = re.search(r"--run-id (\S+)-lane(\d)", session)
        assert found and found.group(2) == str(number)
        ids.append(found.group(1))
        cpus.append(session.split()[1])
    assert ids[0] == ids[1] and re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", ids[0])
    # Each lane on CPUs of its own where there are two; with one, the lanes share it.
    mine = sorted(os.sched_getaffinity(0))
    assert cpus == (["cpus=" + str(mine[0]), "cpus=" + str(mine[1])] if len(mine) >= 2
                    else ["cpus=" + str(mine[0])] * 2)
    base = ids[0]
    assert calls[-1] == (f"ref2va-accept merge --lanes evidence/{base}-lane1 "
                         f"evidence/{base}-lane2 --output evidence/{base}")
    assert "---- lane 2: 5s-lossless,15s-lossy ----" in said


@needs_taskset
@pytest.mark.parametrize(("lane_codes", "merge", "expected"), [
    ((0, 1), 0, 1),  # a lane's failure is the run's
    ((3, 1), 0, 3),  # the first lane's failure first
    ((0, 5), 0, 1),  # a lane that collects nothing fails the run
    ((0, 0), 2, 1),  # lanes that cannot be merged fail the run
])
def test_the_first_failure_is_the_exit_code_and_the_lanes_are_merged_anyway(
        tmp_path: Path, lane_codes: tuple[int, int], merge: int, expected: int) -> None:
    code, said, calls = _campaign(_checkout(tmp_path, lane_codes=lane_codes, merge=merge),
                                  "--lanes", "-k", "smoke")
    assert code == expected, said
    assert sum(c.startswith("pytest ") and c.endswith(" -k smoke") for c in calls) == 2
    assert calls[-1].startswith("ref2va-accept merge --lanes ")
    if merge:
        assert "the lanes could not be merged" in said


@needs_taskset
@pytest.mark.parametrize(("plan", "said_line"), [
    (1, "the campaign's budget refuses this run"), (2, "")])
def test_a_budget_refusal_or_an_unreadable_campaign_starts_no_lane(
        tmp_path: Path, plan: int, said_line: str) -> None:
    code, said, calls = _campaign(_checkout(tmp_path, plan=plan))
    assert code == plan
    assert said_line in said
    assert not any(c.startswith("pytest ") for c in calls)


@pytest.mark.parametrize("arg", ["-m", "-mlossy", "--campaign=x.yaml", "--evidence-dir",
                                 "--run-id=mine"])
def test_what_each_lane_sets_itself_is_refused(tmp_path: Path, arg: str) -> None:
    code, said, calls = _campaign(_checkout(tmp_path), "--lanes", arg, "x")
    assert code == 2
    assert f"ref2va campaign --lanes: {arg} is the lanes' own" in said
    assert calls == []


@pytest.mark.parametrize(("args", "env"), [
    (("-k", "smoke"), {}),  # pytest arguments without --lanes: one session, as before
    ((), {"REF2VA_CAMPAIGN_LANES": "1"}),  # one lane asked for
])
def test_one_session_when_asked_for(tmp_path: Path, args: tuple[str, ...],
                                    env: dict[str, str]) -> None:
    code, said, calls = _campaign(_checkout(tmp_path), *args, **env)
    assert code == 0, said
    sessions = [c for c in calls if c.startswith("pytest ")]
    assert len(sessions) == 1, calls
    assert f"tests -m {SCENARIOS}" in sessions[0] and "--run-id" not in sessions[0]
    assert not any("merge" in c for c in calls)


@needs_taskset
def test_without_a_count_the_script_asks_for_one_lane_per_cpu(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("REF2VA_")}
    subprocess.run(["bash", str(checkout / "ref2va"), "campaign"], capture_output=True,
                   text=True, timeout=60, env={**environ, "PYTHON": sys.executable})
    first = (checkout / "calls.log").read_text().splitlines()[0]
    assert first == ("ref2va-accept lanes fixtures/campaigns/reference.yaml --count "
                     f"{len(os.sched_getaffinity(0))}")


@needs_taskset
def test_sigterm_reaches_every_lane_and_the_lanes_are_still_merged(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    marks = tmp_path / "marks"
    # Each lane's stand-in pytest says it runs, then waits; on SIGTERM it says so and exits 7.
    python = (checkout / ".venv/bin/python").read_text()
    (checkout / ".venv/bin/python").write_text(python.replace(
        '    echo "pytest cpus=$cpus $*" >>',
        f"    trap 'echo term >> {marks}; exit 7' TERM\n"
        f"    echo running >> {marks}\n"
        "    while :; do sleep 0.1; done\n"
        '    echo "pytest cpus=$cpus $*" >>'))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("REF2VA_")}
    wrapper = subprocess.Popen(["bash", str(checkout / "ref2va"), "campaign"],
                               env={**environ, "PYTHON": sys.executable,
                                    "REF2VA_CAMPAIGN_LANES": "2"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    code = sigterm_when(wrapper, lambda: marks.exists() and len(marks.read_text().split()) >= 2)
    assert sorted(marks.read_text().split()) == ["running", "running", "term", "term"]
    assert code == 7  # the lanes' exit code, after the script waited for both
    assert (checkout / "calls.log").read_text().splitlines()[-1].startswith(
        "ref2va-accept merge --lanes ")
