"""The fast tier's guard (tests/conftest.py): a test marked ``fast`` that starts a process fails,
naming itself and the way it started one, whether the test or a fixture it needs starts it; a test
not marked fast starts processes as before, and the guard leaves nothing patched behind."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pty
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import SPAWNERS, in_process_only

pytest_plugins = ["pytester"]


def _run() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def _popen() -> None:
    subprocess.Popen([sys.executable, "-c", "pass"]).wait()


def _check_output() -> None:
    subprocess.check_output(["true"])


def _system() -> None:
    os.system("true")


def _popen_pipe() -> None:
    os.popen("true").close()


def _posix_spawn() -> None:
    os.waitpid(os.posix_spawn("/bin/true", ["true"], dict(os.environ)), 0)


def _fork() -> None:
    pid = os.fork()
    if pid == 0:  # only if the guard let it through: the copy of this test process ends here
        os._exit(0)
    os.waitpid(pid, 0)


def _forkpty() -> None:
    pid, fd = pty.fork()
    if pid == 0:
        os._exit(0)
    os.close(fd)
    os.waitpid(pid, 0)


def _multiprocessing(method: str) -> Callable[[], None]:
    def start() -> None:
        process = multiprocessing.get_context(method).Process(target=int)
        process.start()
        process.join()
    return start


def _asyncio() -> None:
    async def main() -> None:
        process = await asyncio.create_subprocess_exec("true")
        await process.wait()
    asyncio.run(main())


WAYS = {
    "subprocess.run": (_run, "subprocess.Popen"),
    "subprocess.Popen": (_popen, "subprocess.Popen"),
    "subprocess.check_output": (_check_output, "subprocess.Popen"),
    "os.system": (_system, "os.system"),
    "os.popen": (_popen_pipe, "subprocess.Popen"),
    "os.posix_spawn": (_posix_spawn, "os.posix_spawn"),
    "os.fork": (_fork, "os.fork"),
    "pty.fork": (_forkpty, "os.forkpty"),
    "multiprocessing fork": (_multiprocessing("fork"), "os.fork"),
    "multiprocessing spawn": (_multiprocessing("spawn"), "_posixsubprocess.fork_exec"),
    "asyncio": (_asyncio, "subprocess.Popen"),
}


@pytest.mark.fast
@pytest.mark.parametrize("way", WAYS)
def test_a_fast_test_that_starts_a_process_fails_naming_itself_and_the_way(
        way: str, request: pytest.FixtureRequest) -> None:
    start, named = WAYS[way]
    with pytest.raises(pytest.fail.Exception) as caught:
        start()
    said = str(caught.value)
    assert said.startswith(f"{request.node.nodeid} is marked fast (in-process only"), said
    assert f"started a process through {named};" in said, said
    assert "take the mark off it" in said


@pytest.mark.parametrize("way", ["subprocess.run", "os.system", "os.fork"])
def test_a_test_not_marked_fast_starts_processes_as_before(way: str) -> None:
    WAYS[way][0]()  # raises nothing: the guard is not on


def test_the_guard_puts_every_function_back_even_when_the_test_fails() -> None:
    before = [getattr(owner, attr) for owner, attr, _ in SPAWNERS]
    with pytest.raises(pytest.fail.Exception), in_process_only("t.py::test"):
        assert [getattr(owner, attr) for owner, attr, _ in SPAWNERS] != before
        _run()
    assert [getattr(owner, attr) for owner, attr, _ in SPAWNERS] == before
    _run()


SCENARIO = """
import subprocess, sys
import pytest

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def started():
    return subprocess.run([sys.executable, "-c", "pass"]).returncode


def test_in_process():
    assert sum(range(4)) == 6


def test_needs_a_process(started):
    pass
"""


@pytest.mark.fast
def test_a_fixture_that_starts_a_process_for_a_fast_test_is_refused_at_setup(
        pytester: pytest.Pytester) -> None:
    # The project's conftest as the session's plugin: its guard, nothing else of this session's.
    pytester.makeconftest('pytest_plugins = ["tests.conftest"]\n')
    pytester.makeini("[pytest]\nmarkers =\n    fast: x\n")
    pytester.makepyfile(test_scenario=SCENARIO)
    # (pytest-benchmark would ask git for the project's name: a process of this very test.)
    result = pytester.runpytest_inprocess("-p", "no:benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    said = "\n".join(result.outlines)
    assert ("test_scenario.py::test_needs_a_process is marked fast (in-process only" in said), said
    assert "started a process through subprocess.Popen" in said
