"""`./ref2va selftest` runs in phases (timed tests alone, then the rest spread over workers beside
the acceptance scenarios); together the phases must run exactly the tests of the serial form."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _pytest.mark.expression import Expression

from ref2va_accept.campaign import load_campaign
from ref2va_accept.planning import gate_groups, plan_campaign
from tests.unit.plugin_sessions import collect_in_checkout
from tests.unit.suite_runner import CHEAP_STEPS, ROOT
from tests.unit.wrapper_checkout import SCRIPT, fake_checkout

pytest_plugins = ["pytester"]


def _collected(*args: str) -> dict[str, frozenset[str]]:
    """Every test the arguments collect, with the marks pytest's -m reads (iter_markers)."""
    collection = collect_in_checkout(*args)
    assert collection.ret == 0, collection.out[-2000:] + collection.err[-2000:]
    listed = {line for line in collection.out.splitlines() if "::" in line}
    assert listed == set(collection.marks)  # what -q lists is what the collection saw
    return collection.marks


def _selected(items: dict[str, frozenset[str]], args: list[str]) -> set[str]:
    """What a phase's arguments select of one collection: its paths and its -m, evaluated as
    pytest evaluates it (one collection instead of one per phase: each takes seconds of CPU)."""
    paths: list[str] = []
    expression = None
    rest = iter(args)
    for arg in rest:
        if arg == "-m":
            expression = Expression.compile(next(rest))
        elif arg == "--campaign":
            next(rest)  # the acceptance phase's campaign copy: the same tracks, the same tests
        else:
            assert not arg.startswith("-"), f"a phase argument this test does not know: {arg}"
            paths.append(arg.rstrip("/") + "/")
    return {nodeid for nodeid, marks in items.items()
            if any(nodeid.startswith(p) for p in paths)
            and (expression is None or expression.evaluate(
                lambda name, marks=marks, **_: name in marks))}  # type: ignore[misc]


def _phase(pattern: str) -> list[str]:
    """A phase's pytest arguments as the script writes them (without the xdist options)."""
    found = re.search(rf"pytest_rc {pattern}", SCRIPT)
    assert found, f"./ref2va no longer has a phase matching {pattern!r}"
    return shlex.split(found.group(0))[1:]


def test_the_phases_run_exactly_the_serial_selftest(tmp_path: Path) -> None:
    serial = re.search(r"SELFTEST_PATHS=\(([^)]*)\)", SCRIPT)
    assert serial, "./ref2va names the serial selftest's paths in SELFTEST_PATHS"
    items = _collected(*serial.group(1).split())
    everything = set(items)
    timed = _selected(items, _phase(r"tests/unit -m timed"))
    # The acceptance phase runs on the 4-step copy the script makes, as the script makes it (the
    # script's own command, in a process of its own).
    copy = subprocess.run([sys.executable, "-m", "tests.unit.suite_runner", "cheap-copy",
                           str(tmp_path / "c")], capture_output=True, text=True, cwd=ROOT,
                          check=True).stdout.strip()
    assert yaml.safe_load(Path(copy).read_text())["tracks"]["5s-lossless"]["request"][
        "num_inference_steps"] == CHEAP_STEPS
    assert set(yaml.safe_load(Path(copy).read_text())["tracks"]) == set(yaml.safe_load(
        (ROOT / "fixtures/campaigns/reference.yaml").read_text())["tracks"])
    acceptance = _selected(items, _phase(
        r'tests/acceptance -m lossless --campaign "\$ACCEPTANCE_CAMPAIGN"'))
    # Both forms run the same acceptance selection (the phases one after the other as well).
    assert SCRIPT.count('pytest_rc tests/acceptance -m lossless --campaign "$ACCEPTANCE_CAMPAIGN"'
                        ) == 2
    # What it leaves out: the lossy tracks' acceptance scenarios, which ask B0 the very requests
    # of the lossless track of their duration on the same launch line (one gate group), so they
    # would repeat the same requests on the same engine.
    twins = {t for t in everything if t.startswith("tests/acceptance/") and "lossy" in items[t]}
    assert twins and not twins & acceptance
    plans = plan_campaign(load_campaign(copy))
    groups = gate_groups(plans)
    for track_id, plan in plans.items():
        if plan.quality == "lossy":
            assert any(plans[other].quality == "lossless" for other in groups[track_id]), (
                f"{track_id} asks B0 other requests than every lossless track of the acceptance "
                "copy: run its acceptance scenarios in the selftest again (./ref2va, -m lossless)")
    spread = _selected(items, _phase(
        r'tests/unit tests/engine tests/contract -m "not timed and not heavy"'))
    heavy = _selected(items, _phase(r'tests/unit -m "heavy and not timed"'))
    assert timed and acceptance and spread and heavy
    phases = (timed, acceptance, spread, heavy)
    assert all(not a & b for i, a in enumerate(phases) for b in phases[i + 1:])
    assert timed | spread | acceptance | heavy == everything - twins
    # The timed phase holds the self-test whose verdicts rest on measured latency; the heavy
    # one, started when it is done, the tests that load large scorer models.
    assert any("test_lossless_suite.py" in t for t in timed)
    assert any("test_vbench_upstream.py" in t for t in heavy)
    assert any("test_lossy_suite.py" in t for t in heavy)
    # The fast tier (./ref2va fast) is a part of phase 2, run on its own: nothing of it is timed
    # or heavy, and the selftest runs each of its tests once, in phase 2.
    fast_paths = re.search(r"FAST_PATHS=\(([^)]*)\)", SCRIPT)
    assert fast_paths and 'run_pytest "${FAST_PATHS[@]}" -m fast ' in SCRIPT
    fast = _selected(items, [*fast_paths.group(1).split(), "-m", "fast"])
    assert fast and fast <= spread


@pytest.mark.fast
def test_the_spread_phase_is_file_by_file_with_the_spread_modules_test_by_test() -> None:
    line = next(line for line in SCRIPT.splitlines() if "pytest_rc tests/unit tests/engine" in line)
    following = SCRIPT.splitlines()[SCRIPT.splitlines().index(line) + 1]
    # loadfile, which tests/conftest.py's scheduler refines (loadgroup groups nothing with
    # pytest 9.2: see there).
    assert "--dist loadfile" in line + following


ALONE = """
import os, time
import pytest

@pytest.mark.parametrize("n", range(4))
def test_alone(n, tmp_path):
    time.sleep(1.0)
    with open(os.path.join(os.environ["WHERE"], f"{n}.txt"), "w") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"])
"""
SHARED = ALONE + """
@pytest.fixture(scope="module")
def shared_run():
    with open("setups.txt", "a") as f:
        f.write("shared\\n")
    return 1

@pytest.mark.parametrize("n", range(4))
def test_shared(shared_run, n):
    time.sleep(0.3)
"""


def _conftest(spread: str) -> str:
    """tests/conftest.py, with SPREAD naming a module of the pytester session."""
    text = (ROOT / "tests/conftest.py").read_text()
    found = re.search(r"^SPREAD = frozenset\(\{.*?\}\)$", text, re.S | re.M)
    assert found, "tests/conftest.py no longer defines SPREAD as a frozenset literal"
    return text.replace(found.group(0), f"SPREAD = frozenset({{{spread!r}}})")


def test_a_spread_module_runs_test_by_test_and_a_shared_run_once(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_conftest("test_spread.py"))
    pytester.makepyfile(test_spread=ALONE, test_file=SHARED)
    where = pytester.mkdir("where")
    pytester.mkdir("file")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WHERE", str(where))
        result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "-p",
                                               "no:randomly", "test_spread.py")
        result.assert_outcomes(passed=4)
        workers = {p.read_text() for p in where.iterdir()}
        assert workers == {"gw0", "gw1"}  # the four independent tests went to both workers
        env.setenv("WHERE", str(pytester.path / "file"))
        result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "-p",
                                               "no:randomly", "test_file.py")
    result.assert_outcomes(passed=8)
    # A module outside SPREAD stays whole on one worker: its shared run happened once.
    assert (pytester.path / "setups.txt").read_text() == "shared\n"
    assert len({p.read_text() for p in (pytester.path / "file").iterdir()}) == 1


ORDER = """
import os
import pytest

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("n", range(6))
def test_in_process(n):
    with open(os.environ["ORDER"], "a") as f:
        f.write("fast\\n")
"""
SLOW = """
import os


def test_starts_an_engine():
    with open(os.environ["ORDER"], "a") as f:
        f.write("slow\\n")
"""


def test_the_costliest_unit_starts_first_and_the_fast_ones_fill_the_end(
        pytester: pytest.Pytester) -> None:
    # xdist alone would start the module with more tests first.
    pytester.makeconftest(_conftest("test_none.py"))
    pytester.makeini("[pytest]\nmarkers =\n    fast: x\n")
    pytester.makepyfile(test_a_fast=ORDER, test_b_slow=SLOW)
    order = pytester.path / "order.txt"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ORDER", str(order))
        result = pytester.runpytest_subprocess("-n", "1", "--dist", "loadfile", "-p",
                                               "no:randomly")
    result.assert_outcomes(passed=7)
    assert order.read_text().splitlines() == ["slow"] + ["fast"] * 6


@pytest.mark.fast
def test_a_units_cost_counts_its_tests_not_marked_fast() -> None:
    from tests.conftest import FAST_TEST_COST, unit_cost

    assert unit_cost(["a", "b", "c"], {"a", "b"}) == pytest.approx(1 + 2 * FAST_TEST_COST)
    assert unit_cost(["a"], set()) > unit_cost([f"f{i}" for i in range(99)],
                                                {f"f{i}" for i in range(99)})


def test_a_spread_module_sharing_a_fixture_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_conftest("test_file.py"))
    pytester.makepyfile(test_file=SHARED)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = "\n".join(result.errlines)
    assert "a module in SPREAD" in said and "test_file.py::test_shared[0] uses shared_run" in said


@pytest.mark.parametrize(("codes", "expected"), [
    ({}, 0),
    ({"-m timed": 1}, 1),
    ({"not timed": 2}, 2),
    ({"pytest tests/acceptance": 1}, 1),
    ({"-m timed": 5}, 1),  # a phase that collects nothing fails the selftest
])
def test_the_phased_selftest_exits_with_its_first_failure(
        tmp_path: Path, codes: dict[str, int], expected: int) -> None:
    checkout = fake_checkout(tmp_path, codes)
    # (The room check has tests of its own, below; this stand-in writes nothing.)
    result = subprocess.run(["bash", str(checkout / "ref2va"), "selftest"], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHON": sys.executable,
                                                        "REF2VA_ROOM_CHECK": "0"})
    assert result.returncode == expected, result.stderr[-2000:]


def test_the_selftest_ends_saying_what_it_took_in_wall_time_and_cpu(tmp_path: Path) -> None:
    """Its last line: the wall time and the CPU of every process it waited for, counted with
    theirs; here a stand-in timed phase that burns 2.2 s of CPU in a grandchild of the script
    (the script's subshell, then the stand-in pytest), as an engine under pytest would be."""
    checkout = fake_checkout(tmp_path, {})
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 2.2: pass"
    (checkout / ".venv/bin/python").write_text(
        f'#!/bin/sh\ncase "$*" in\n    *"-m timed"*) {shlex.quote(sys.executable)} -c '
        f'{shlex.quote(burn)} ;;\nesac\nexit 0\n')
    result = subprocess.run(["bash", str(checkout / "ref2va"), "selftest"], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHON": sys.executable,
                                                        "REF2VA_ROOM_CHECK": "0"})
    assert result.returncode == 0, result.stderr[-2000:]
    last = result.stderr.splitlines()[-1]
    found = re.fullmatch(r"ref2va selftest: took (\d+) min (\d+) s, (\d+) s of CPU", last)
    assert found, last
    minutes, seconds, cpu = (int(g) for g in found.groups())
    assert 2 <= cpu <= 60 * minutes + seconds + 1, last


def _selftest_with_needs(tmp_path: Path, tmp_gb: int, env_gb: int, **env: str
                        ) -> subprocess.CompletedProcess[str]:
    """The phased selftest of a stand-in checkout whose script needs `tmp_gb` GB under TMPDIR
    and `env_gb` GB for VBench's environment (its pytest records each phase it was asked for)."""
    (tmp_path / "checkout").mkdir(parents=True)
    checkout = fake_checkout(tmp_path / "checkout", {})
    script = (checkout / "ref2va").read_text()
    for name, value in (("SELFTEST_TMP_GB", tmp_gb), ("VBENCH_ENV_GB", env_gb)):
        assert f"\n{name}=" in script, name
        script = re.sub(rf"\n{name}=[0-9]+\n", f"\n{name}={value}\n", script)
    (checkout / "ref2va").write_text(script)
    (checkout / "scripts").mkdir()
    (checkout / "scripts/vbench-env.txt").write_text("torch==2.14.1\n")
    called = tmp_path / "called"
    python = checkout / ".venv/bin/python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {called}\nexit 0\n')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # Not this session's own settings (CI sets REF2VA_UPSTREAM=1): only those the test gives.
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("REF2VA_UPSTREAM", "REF2VA_VBENCH_PYTHON", "REF2VA_ROOM_CHECK")}
    return subprocess.run(["bash", str(checkout / "ref2va"), "selftest"], capture_output=True,
                          text=True, timeout=60, env={**inherited, "PYTHON": sys.executable,
                                                      "TMPDIR": str(tmp), **env})


def _free_gb(path: Path) -> int:
    usage = os.statvfs(path)
    return usage.f_bavail * usage.f_frsize // 2**30


def test_a_selftest_without_the_room_it_needs_stops_before_any_phase(tmp_path: Path) -> None:
    more = _free_gb(tmp_path) + 10  # more than this disk has
    refused = _selftest_with_needs(tmp_path, more, 0)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert (f"ref2va selftest: too little disk: it needs {more} GB free on the disk of "
            f"{tmp_path / 'tmp'} and this checkout, which has") in refused.stderr
    assert "REF2VA_ROOM_CHECK=0 to try anyway" in refused.stderr
    assert not (tmp_path / "called").exists()  # no phase started
    # VBench's environment counts only where upstream VBench is asked for and is not built.
    assert _selftest_with_needs(tmp_path / "a", 0, more).returncode == 0
    upstream = _selftest_with_needs(tmp_path / "b", 0, more, REF2VA_UPSTREAM="1")
    assert upstream.returncode == 2
    assert f"({more} GB of it for VBench's environment)" in upstream.stderr
    given = _selftest_with_needs(tmp_path / "c", 0, more, REF2VA_UPSTREAM="1",
                                 REF2VA_VBENCH_PYTHON=sys.executable)
    assert given.returncode == 0, given.stderr[-2000:]


def test_the_room_check_can_be_skipped_and_passes_where_there_is_room(tmp_path: Path) -> None:
    skipped = _selftest_with_needs(tmp_path / "a", _free_gb(tmp_path) + 10, 0,
                                   REF2VA_ROOM_CHECK="0")
    assert skipped.returncode == 0, skipped.stderr[-2000:]
    assert "-m timed" in (tmp_path / "a/called").read_text()
    roomy = _selftest_with_needs(tmp_path / "b", 0, 0)
    assert roomy.returncode == 0 and "too little disk" not in roomy.stderr


AFFINITY = ROOT / "scripts/cpu_affinity.py"


def test_split_names_the_first_cpu_and_the_rest() -> None:
    out = subprocess.run([sys.executable, str(AFFINITY), "split"], capture_output=True,
                         text=True, check=True).stdout
    cpus = sorted(os.sched_getaffinity(0))
    first, _, rest = out.strip("\n").partition(" ")
    assert int(first) == cpus[0]
    assert rest == ",".join(map(str, cpus[1:]))


def test_widen_gives_a_pinned_tree_every_cpu_and_refuses_bad_arguments() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    # A pinned parent whose child (started pinned, so inheriting it) sleeps.
    parent = subprocess.Popen(
        ["taskset", "-c", str(cpus[0]), sys.executable, "-c",
         "import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', "
         "'import time; time.sleep(60)']); print(c.pid, flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert os.sched_getaffinity(child) == {cpus[0]}
        done = subprocess.run([sys.executable, str(AFFINITY), "widen", str(parent.pid)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert os.sched_getaffinity(parent.pid) == set(cpus)
        assert os.sched_getaffinity(child) == set(cpus)
    finally:
        for pid in (child, parent.pid):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        parent.wait()
        parent.stdout.close()  # type: ignore[union-attr]
        if child:  # reaped by the parent's end (it is the parent's child, not ours): wait it out
            deadline = time.monotonic() + 10
            while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
    wrong = subprocess.run([sys.executable, str(AFFINITY), "widen", "x"], capture_output=True,
                           text=True)
    assert wrong.returncode == 2 and "widen PID" in wrong.stderr


@pytest.mark.fast
def test_the_phases_run_at_once_on_separate_cpus_when_there_are_two() -> None:
    body = SCRIPT.split("selftest_phased() {", 1)[1].split("\n}\n", 1)[0]
    # Phase 1 on the first CPU, once a VBench build still running (CI's, in the background) ends.
    assert "PIN_CPUS=$first; vbench_build_done; pytest_rc tests/unit -m timed" in body
    assert body.count("PIN_CPUS=$rest; pytest_rc") == 2
    # Widened once phase 1 is over, before phase 2 is waited for.
    assert body.index('wait_for "$timed_pid"') < body.index("cpu_affinity.py widen") < body.index(
        'wait_for "$spread_pid"')
    # The heavy tests take phase 1's CPU once it is free, beside phase 2, not after it; the
    # first of the two to end hands its CPU to the other.
    heavy = body.index('PIN_CPUS=$first; pytest_rc tests/unit -m "heavy and not timed"')
    assert body.index('wait_for "$timed_pid"') < heavy < body.index("cpu_affinity.py widen")
    assert heavy < body.index('wait_for "$spread_pid"')
    assert "selftest_in_turn" in body  # one CPU: one after the other


def _build_done(folder: Path, **env: str) -> tuple[float, str]:
    """The script's vbench_build_done, run in `folder`: its seconds and what it said."""
    body = SCRIPT[SCRIPT.index("vbench_build_done() {"):]
    function = body[:body.index("\n}\n") + 3]
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", f"VBENCH_DIR=.venv-vbench\n{function}vbench_build_done"],
                          cwd=folder, env={"PATH": os.environ["PATH"], **env},
                          capture_output=True, text=True, timeout=30, check=True)
    return time.monotonic() - started, done.stderr


def test_the_timed_phase_waits_for_a_vbench_build_holding_its_lock(tmp_path: Path) -> None:
    lock = tmp_path / ".venv-vbench.lock"
    lock.touch()
    # A build holds the lock for 2 s: the timed phase waits it out, and says so.
    holder = subprocess.Popen(["flock", str(lock), "sleep", "2"])
    try:
        time.sleep(0.3)
        waited, said = _build_done(tmp_path, REF2VA_UPSTREAM="1")
        assert waited >= 1.2 and "wait for VBench's environment build" in said
        # Without REF2VA_UPSTREAM nothing is waited for, lock held or not.
        waited, said = _build_done(tmp_path)
        assert waited < 1.0 and said == ""
    finally:
        holder.wait(10)
    # The build done (the lock free): no wait, nothing said.
    waited, said = _build_done(tmp_path, REF2VA_UPSTREAM="1")
    assert waited < 1.0 and said == ""
