"""`arms.say_now`: a line said from inside a fixture's set-up or a test reaches the terminal while
the test passes. Written to pytest's terminal reporter as is, pytest's output capture takes it
into the test's report (shown only on failure): the timed lossless suite's "run again" line and
the warm-up demonstration's result were lost so, and all a log showed was a broken progress
line. (Each session runs in a process of its own: in this one, pytester's capture of the
inner session's output would show the lines either way.)"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SESSION = """
import pytest

from ref2va_accept.arms import say_now

@pytest.fixture(scope="module")
def announced(request):
    {write}(request.config, "said in a module fixture's set-up")
    return 1

def test_first(announced, pytestconfig):
    {write}(pytestconfig, "said in a test")

def test_second(announced):
    pass
"""

# The reporter written to directly, as the timed suite and the warm-up demonstration did.
PLAIN_WRITER = """
def plain_write_line(config, line):
    config.pluginmanager.get_plugin("terminalreporter").write_line(line)
"""


def test_a_line_said_in_set_up_or_a_test_reaches_the_terminal(pytester: pytest.Pytester
                                                              ) -> None:
    pytester.makepyfile(test_said=SESSION.format(write="say_now"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "said in a module fixture's set-up" in out, out
    assert "said in a test" in out, out
    assert "Captured stdout" not in out


def test_the_reporter_alone_loses_the_line_while_capture_runs(pytester: pytest.Pytester) -> None:
    # What say_now is for: the same session writing to the reporter directly shows nothing.
    pytester.makeconftest(PLAIN_WRITER)
    pytester.makepyfile(test_said=SESSION.format(write="plain_write_line").replace(
        "from ref2va_accept.arms import say_now", "from conftest import plain_write_line"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "said in" not in out, out
