"""Every command README.md shows is one that works, checked in-process against what it names.

The README is the operator's page: a command on it that the code no longer accepts sends someone
on the 910C host down a dead end. So each command in its fenced code blocks and inline code spans
is checked against its source:

- ``ref2va-accept SUB ...``: SUB (and a nested one, ``scorers check``) is a subcommand of the
  parser ``ref2va_accept.cli._main.build_parser`` builds, and every ``--flag`` is accepted by that
  subcommand's parser;
- ``./ref2va MODE ...``: MODE is an arm of the ``case "$cmd" in`` statement of the ``ref2va``
  script, and every ``--flag`` is that arm's own, or an option of the pytest plugins the mode
  runs under;
- ``pytest ...``: every ``--option`` is one the harness's plugin adds;
- a ``-m`` expression in either names only registered marks;
- every repository path it names (``fixtures/...``, ``engine/...``, ``docs/...``, ...) exists,
  and every relative link and ``#anchor`` resolves;
- the expected ``ref2va-accept --help`` command list is the parser's, in its order.

The checks are one function over a text, so each rule is also run on planted bad commands that
it must report, and on good ones it must let through. Nothing here starts a process.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ref2va_accept.cli import build_parser

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SCRIPT = ROOT / "ref2va"
# The checkout's tracked top level: a path in the text that starts with one of these is a
# repository path and must exist (evidence/, .venv/ and the like are made by runs, not shipped).
REPO_TOP = ("fixtures", "engine", "docs", "scripts", "tests", "benchmarks", "src", ".ci")
# The judge's package is being reorganised into subpackages: the operator's page names commands
# and files an operator uses, never a module path inside it (docs/architecture.md maps those).
PACKAGE_PREFIX = "src/ref2va_accept/"
README_MAX_LINES = 250
QUICK_START_HEADING = "## Host quick start"
QUICK_START_BY_LINE = 100
COMMANDS = ("ref2va-accept", "./ref2va", "pytest")
MARK_KEYWORDS = frozenset({"and", "or", "not"})


def options_added_in(sources: Iterable[Path]) -> frozenset[str]:
    """The option names each source's ``addoption(...)`` calls spell out, read with ``ast``
    rather than run: a plugin's pytest_addoption may do more than add options (pytest-benchmark's
    asks git for the project's name)."""
    names: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "addoption"):
                names.update(arg.value for arg in node.args if isinstance(arg, ast.Constant)
                             and isinstance(arg.value, str) and arg.value.startswith("-"))
    return frozenset(names)


def module_source(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise AssertionError(f"{name}: not importable here")
    return Path(spec.origin)


def plugin_sources() -> list[Path]:
    """The harness's pytest plugin: the package the root conftest.py loads, and its modules."""
    package = importlib.import_module("ref2va_accept.plugin")
    names = ["ref2va_accept.plugin", *getattr(package, "pytest_plugins", ())]
    return [module_source(name) for name in names]


def script_modes(text: str) -> dict[str, frozenset[str]]:
    """The modes of the ref2va script's ``case "$cmd" in`` statement, each with the ``--flags``
    its arm reads itself (``"--lanes"``); the catch-all ``*)`` is not a mode."""
    start = re.search(r'^case "\$cmd" in\s*$', text, re.M)
    if start is None:
        raise AssertionError(f'{SCRIPT.name}: no `case "$cmd" in` statement')
    end = re.search(r"^esac\s*$", text[start.end():], re.M)
    if end is None:
        raise AssertionError(f'{SCRIPT.name}: `case "$cmd" in` has no `esac`')
    body = text[start.end():start.end() + end.start()]
    arms = list(re.finditer(r"^    ([^\s()]+)\)\s*$", body, re.M))
    modes: dict[str, frozenset[str]] = {}
    for i, arm in enumerate(arms):
        stop = arms[i + 1].start() if i + 1 < len(arms) else len(body)
        flags = frozenset(re.findall(r'"(--[\w-]+)"', body[arm.end():stop]))
        for name in arm.group(1).split("|"):
            if name != "*":
                modes[name] = flags
    return modes


def registered_marks(marker_lines: Iterable[str]) -> frozenset[str]:
    """Mark names of pytest's ``markers`` ini value (``name: meaning``, ``name(arg): ...``)."""
    return frozenset(re.split(r"[:(]", line, maxsplit=1)[0].strip() for line in marker_lines)


@dataclass(frozen=True)
class Known:
    """What the commands are checked against."""

    parser: argparse.ArgumentParser
    modes: dict[str, frozenset[str]]
    marks: frozenset[str]
    plugin_options: frozenset[str]
    bench_options: frozenset[str]
    root: Path = ROOT


# argparse has no public way to list a parser's subcommands and options; its help output is
# built from the same two attributes.
def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def flags_of(parser: argparse.ArgumentParser) -> frozenset[str]:
    return frozenset(parser._option_string_actions)


@dataclass
class Command:
    line: int
    text: str


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


FENCE = re.compile(r"^( *)```([\w-]*)[^\n]*\n(.*?)^\1```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")


def _command_words(text: str) -> list[str] | None:
    """The words of `text` from its command on, or None when it is no command of ours: leading
    ``VAR=value`` assignments, a ``$ `` prompt and a ``.venv/bin/`` or ``python -m`` lead-in are
    passed over."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return None
    while words and (words[0] == "$" or re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0])):
        words = words[1:]
    if len(words) >= 3 and words[0].endswith("python") and words[1] == "-m":
        words = words[2:]
    if words:
        words[0] = words[0].removeprefix(".venv/bin/")
    if not words or words[0] not in COMMANDS:
        return None
    return words


def commands_in(text: str) -> Iterator[Command]:
    """Every command in `text`'s fenced blocks (a line; an indented line that begins with an
    option, or a line after one ending in a backslash, continues it) and inline code spans."""
    for block in FENCE.finditer(text):
        if block.group(2) in ("text", "json", "yaml", "diff"):
            continue  # output and data, not commands
        current: Command | None = None
        first = line_of(text, block.start(3))
        indent = len(block.group(1))
        for n, line in enumerate(block.group(3).splitlines()):
            raw = line[indent:] if line[:indent].isspace() else line
            stripped = raw.strip()
            if stripped.startswith("#"):
                continue  # a comment line, within a command's continuation or between commands
            if current is not None and (
                    current.text.endswith("\\")
                    or (raw[:1].isspace() and stripped[:1] in ("[", "-", "(", "|"))):
                current.text = current.text.removesuffix("\\") + " " + stripped
                continue
            if current is not None:
                yield current
            current = Command(first + n, stripped) if stripped else None
        if current is not None:
            yield current
    # Spans outside the fenced blocks (blanked out, line for line, so line numbers stay).
    unfenced = FENCE.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    for span in SPAN.finditer(unfenced):
        yield Command(line_of(unfenced, span.start()), " ".join(span.group(1).split()))


def _long_flags(words: Iterable[str]) -> Iterator[str]:
    for word in words:
        bare = word.strip("[](){}|,")
        if bare.startswith("--") and len(bare) > 2:
            yield bare.split("=", 1)[0]


def _marks_named(words: list[str]) -> Iterator[str]:
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            expression = words[i + 1]
        elif word.startswith("-m") and len(word) > 2 and not word.startswith("--"):
            expression = word[2:].lstrip("=")
        else:
            continue
        for name in re.findall(r"[\w-]+", expression):
            if name not in MARK_KEYWORDS:
                yield name


def check_command(words: list[str], known: Known) -> list[str]:
    """What is wrong with one command, each problem in a line (empty: nothing)."""
    problems: list[str] = []
    program = words[0]
    if program == "ref2va-accept":
        parser, named = known.parser, "ref2va-accept"
        rest = words[1:]
        if rest and rest[0].endswith(","):
            # A list of commands (`ref2va-accept plan, ledger, merge`): each must be one.
            listed = [w.rstrip(",") for w in rest[:next(
                (i + 1 for i, w in enumerate(rest) if not w.endswith(",")), len(rest))]]
            choices = subcommands(parser)
            return [f"`ref2va-accept {name}`: no such command (the parser has: "
                    f"{', '.join(choices)})" for name in listed if name not in choices]
        while rest and not rest[0].startswith("-"):
            choices = subcommands(parser)
            if not choices:
                break
            if rest[0] not in choices:
                problems.append(f"`{named} {rest[0]}`: no such command (the parser has: "
                                f"{', '.join(choices)})")
                return problems
            parser, named, rest = choices[rest[0]], f"{named} {rest[0]}", rest[1:]
        accepted = flags_of(parser)
        problems += [f"`{named}` has no option {flag} (it takes: "
                     f"{', '.join(sorted(accepted))})"
                     for flag in _long_flags(rest) if flag not in accepted]
    elif program == "./ref2va":
        if len(words) < 2:
            return problems
        mode = words[1]
        if mode not in known.modes:
            return [f"`./ref2va {mode}`: the ref2va script has no mode {mode!r} (its case "
                    f"statement handles: {', '.join(known.modes)})"]
        accepted = known.modes[mode] | known.plugin_options
        if mode == "bench":
            accepted |= known.bench_options
        problems += [f"`./ref2va {mode}`: {flag} is neither the script's own option for "
                     f"{mode!r} nor one its pytest plugins add"
                     for flag in _long_flags(words[2:]) if flag not in accepted]
    else:  # pytest
        problems += [f"`pytest`: {flag} is not an option the harness's plugin adds (it adds: "
                     f"{', '.join(sorted(known.plugin_options))})"
                     for flag in _long_flags(words[1:]) if flag not in known.plugin_options]
    if program in ("./ref2va", "pytest"):
        problems += [f"`{program}` -m names {mark!r}, which is not a registered mark"
                     for mark in _marks_named(words) if mark not in known.marks]
    return problems


PATH = re.compile(r"(?<![\w./~<>-])((?:" + "|".join(re.escape(t) for t in REPO_TOP)
                  + r")/[\w.@/-]*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a markdown text's headings (outside fenced blocks)."""
    anchors: set[str] = set()
    unfenced = FENCE.sub("", text)
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", unfenced, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 1
        while anchor in anchors:
            anchor, n = f"{slug}-{n}", n + 1
        anchors.add(anchor)
    return anchors


def check_paths(text: str, page: Path, known: Known, *, package_paths: bool) -> list[str]:
    """Repository paths and relative links of a page at `page` that do not resolve."""
    problems: list[str] = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if text[match.end():match.end() + 1] in ("<", "*", "{", "$"):
            continue  # a pattern (`engine/profiles/<engine>/*.yaml`), not a file
        where = f"{page.name}:{line_of(text, match.start())}"
        if not package_paths and path.startswith(PACKAGE_PREFIX):
            problems.append(f"{where}: {path} is a path inside the judge's package; name the "
                            "command or the docs page instead (docs/architecture.md maps the "
                            "modules)")
        elif not (known.root / path.rstrip("/")).exists():
            problems.append(f"{where}: {path} does not exist in the repository")
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        where = f"{page.name}:{line_of(text, match.start())}"
        file_part, _, anchor = target.partition("#")
        if not file_part:
            linked, linked_text = page, text
        else:
            linked = (page.parent / file_part).resolve()
            if not linked.exists():
                problems.append(f"{where}: the link {target} leads to no file")
                continue
            linked_text = (linked.read_text(encoding="utf-8")
                           if anchor and linked.suffix == ".md" else "")
        if anchor and linked.suffix == ".md":
            if anchor not in heading_anchors(linked_text):
                problems.append(f"{where}: the link {target} names no heading of {linked.name}")
    return problems


HELP = re.compile(r"usage: ref2va-accept [^{]*\{([^}]*)\}")


def check_help_lists(text: str, page: Path, known: Known) -> list[str]:
    expected = list(subcommands(known.parser))
    problems = []
    for match in HELP.finditer(text):
        shown = [name.strip() for name in match.group(1).split(",")]
        if shown != expected:
            missing = [c for c in expected if c not in shown]
            extra = [c for c in shown if c not in expected]
            problems.append(
                f"{page.name}:{line_of(text, match.start())}: the expected `ref2va-accept "
                f"--help` lists {shown}, the parser {expected} (missing: {missing or 'none'}; "
                f"not commands: {extra or 'none'}; otherwise the order differs)")
    return problems


def check_page(text: str, page: Path, known: Known, *, package_paths: bool = False) -> list[str]:
    """Every problem of a markdown page: its commands, paths, links and help listings."""
    problems = []
    for command in commands_in(text):
        words = _command_words(command.text)
        if words is not None:
            problems += [f"{page.name}:{command.line}: {problem}"
                         for problem in check_command(words, known)]
    problems += check_paths(text, page, known, package_paths=package_paths)
    problems += check_help_lists(text, page, known)
    return problems


def check_shape(text: str) -> list[str]:
    """The README stays the operator's page: short, with the host quick start near the top."""
    lines = text.splitlines()
    problems = []
    if len(lines) >= README_MAX_LINES:
        problems.append(f"README.md has {len(lines)} lines; keep it under {README_MAX_LINES} "
                        "and move the detail into docs/")
    starts = [i for i, line in enumerate(lines) if line.startswith(QUICK_START_HEADING)]
    if not starts:
        return [*problems, f"README.md has no '{QUICK_START_HEADING}' section"]
    end = next((i for i in range(starts[0] + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    last = max(i for i in range(starts[0], end) if lines[i].strip()) + 1
    if last > QUICK_START_BY_LINE:
        problems.append(f"README.md's host quick start ends at line {last}; it must end by line "
                        f"{QUICK_START_BY_LINE}")
    return problems


@pytest.fixture(scope="module")
def known(pytestconfig: pytest.Config) -> Known:
    return Known(
        parser=build_parser(),
        modes=script_modes(SCRIPT.read_text(encoding="utf-8")),
        marks=registered_marks(pytestconfig.getini("markers")),
        plugin_options=options_added_in(plugin_sources()),
        # `./ref2va bench` runs benchmarks/ with its conftest and pytest-benchmark.
        bench_options=options_added_in([ROOT / "benchmarks" / "conftest.py",
                                        module_source("pytest_benchmark.plugin")]),
    )


# --- the real pages -------------------------------------------------------------------------


def test_every_command_path_and_link_in_the_readme_is_real(known: Known) -> None:
    problems = check_page(README.read_text(encoding="utf-8"), README, known)
    assert not problems, "README.md:\n" + "\n".join(problems)


def test_the_readme_stays_the_operators_page() -> None:
    assert check_shape(README.read_text(encoding="utf-8")) == []


def test_the_readme_shows_commands_of_every_kind_and_the_help_list() -> None:
    # The check above must have something to check: a README whose commands the parsing missed
    # would pass it empty.
    text = README.read_text(encoding="utf-8")
    programs = {words[0] for c in commands_in(text)
                if (words := _command_words(c.text)) is not None}
    assert programs == set(COMMANDS)
    assert HELP.search(text), "README.md shows no expected `ref2va-accept --help` list"


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_command_path_and_link_in_the_docs_is_real(known: Known, page: Path) -> None:
    # The docs pages name module paths where they explain the code; the rest holds as for the
    # README.
    problems = check_page(page.read_text(encoding="utf-8"), page, known, package_paths=True)
    assert not problems, f"{page.name}:\n" + "\n".join(problems)


# --- what the checks are checked against ----------------------------------------------------


def test_the_script_modes_are_its_case_statement_arms() -> None:
    script = ('cmd=${1:-}\ncase "$cmd" in\n    campaign)\n        if [ "${1:-}" = "--lanes" ]; '
              'then shift; fi\n        ;;\n    selftest|check)\n        run "--serial"\n'
              '        ;;\n    *)\n        echo usage\n        ;;\nesac\n')
    assert script_modes(script) == {"campaign": {"--lanes"}, "selftest": {"--serial"},
                                    "check": {"--serial"}}


def test_a_script_without_the_case_statement_is_said() -> None:
    with pytest.raises(AssertionError, match="no `case"):
        script_modes("echo nothing\n")


def test_the_real_sources_are_read(known: Known) -> None:
    assert {"campaign", "selftest", "bench"} <= set(known.modes)
    assert "--lanes" in known.modes["campaign"]
    assert {"5s", "15s", "lossless", "lossy", "bringup", "fast"} <= known.marks
    assert {"--campaign", "--no-localize", "--run-id"} <= known.plugin_options
    assert {"--bench-mib", "--benchmark-json"} <= known.bench_options
    assert "scorers" in subcommands(known.parser)


# --- planted commands: each rule reports a bad one and lets a good one through --------------

PAGE = ROOT / "PLANTED.md"


@pytest.mark.parametrize(("text", "reported"), [
    ("```sh\nref2va-accept frobnicate CAMPAIGN\n```\n", "no such command"),
    ("Run `ref2va-accept verify CAMPAIGN --jsonn`.\n", "has no option --jsonn"),
    ("```sh\nref2va-accept freeze CAMPAIGN --json\n```\n", "`ref2va-accept freeze` has no option"),
    ("`ref2va-accept scorers rebuild DIR`\n", "`ref2va-accept scorers rebuild`: no such command"),
    ("`ref2va-accept plan, ledger, merg, lanes`\n", "`ref2va-accept merg`: no such command"),
    ("`ref2va-accept scorers check --campaign C --gpu`\n", "has no option --gpu"),
    ("```sh\nref2va-accept plan CAMPAIGN \\\n    --tracks 5s-lossy\n```\n", "no option --tracks"),
    ("```sh\nref2va-accept score V.mp4 [--baseline B.mp4]\n"
     "                    [--frames N | --campaighn C]\n```\n", "no option --campaighn"),
    ("```sh\n./ref2va deploy\n```\n", "no mode 'deploy'"),
    ("`./ref2va selftest --lanes`\n", "--lanes is neither"),
    ("`./ref2va campaign --bench-mib 4`\n", "--bench-mib is neither"),
    ('`./ref2va campaign -m "lossy and 30s"`\n', "names '30s'"),
    ('```sh\nREF2VA_CAMPAIGN=x.yaml pytest -m "(quality or speedy) and 5s"\n```\n',
     "names 'speedy'"),
    ("`pytest -m=turbo`\n", "names 'turbo'"),
    ("`pytest --localize-off`\n", "--localize-off is not an option"),
    ("`.venv/bin/python -m pytest tests --no-localise`\n", "--no-localise is not an option"),
    ("See `fixtures/campaigns/9100c.yaml`.\n", "fixtures/campaigns/9100c.yaml does not exist"),
    ("```sh\nref2va-accept verify engine/profiles/vllm-omni/b1.yaml\n```\n", "b1.yaml does not"),
    ("The sanitizer is src/ref2va_accept/sanitize/.\n", "inside the judge's package"),
    ("[the protocol](docs/protocool.md)\n", "leads to no file"),
    ("[the rule](docs/protocol.md#no-such-heading)\n", "names no heading of protocol.md"),
    ("[up](#quick-start)\n## Quick stat\n", "names no heading of PLANTED.md"),
    ("```text\nusage: ref2va-accept [-h]\n                     {freeze,verify}\n```\n",
     "missing: ['preflight'"),
])
def test_a_planted_bad_command_is_reported(known: Known, text: str, reported: str) -> None:
    problems = check_page(text, PAGE, known)
    assert any(reported in problem for problem in problems), problems
    assert all(problem.startswith("PLANTED.md:") for problem in problems), problems


@pytest.mark.parametrize("text", [
    "```sh\nref2va-accept verify fixtures/campaigns/910c.yaml --json\n```\n",
    "`ref2va-accept --help`, `ref2va-accept --version` and `ref2va-accept`\n",
    "`ref2va-accept freeze, verify, preflight`: the campaign's commands\n",
    "```sh\nref2va-accept plan CAMPAIGN \\\n    --track 5s-lossy --json\n```\n",
    "```sh\nref2va-accept score V.mp4 [--baseline B.mp4]\n"
    "                    [--frames N | --campaign C --track T] [--allow-partial]\n```\n",
    "`ref2va-accept scorers check --campaign C --device npu` and `ref2va-accept scorers`\n",
    '`./ref2va campaign --lanes -k lossless` and `./ref2va campaign -m "profile and 5s"`\n',
    "`./ref2va selftest --serial -k lanes` and `./ref2va bench --bench-mib 256 "
    "--benchmark-json b.json`\n",
    '```sh\nexport REF2VA_CAMPAIGN=fixtures/campaigns/910c.yaml\npytest -m "lossy and 15s"\n```\n',
    "```sh\nREF2VA_CAMPAIGN=fixtures/campaigns/910c.yaml pytest tests/bringup -m bringup\n```\n",
    "`pytest -m warmup_demonstration --warmup-steps 4` and `pytest --no-localize`\n",
    "```text\n./ref2va deploy --frobnicate\n```\n",  # output, not a command
    "Runs write `evidence/<run-id>/report.html`; profiles are `engine/profiles/<engine>/*.yaml`.\n",
    "[the protocol](docs/protocol.md#calibration), [host](docs/host.md#1-install-the-judge)\n",
    "[down](#the-commands-1)\n## The commands\n## The commands\n",
])
def test_a_good_command_passes(known: Known, text: str) -> None:
    assert check_page(text, PAGE, known) == []


def help_list(names: list[str]) -> str:
    return ("```text\nusage: ref2va-accept [-h] [--version] [-v]\n                     {"
            + ",".join(names) + "}\n```\n")


def test_the_parsers_own_help_list_passes(known: Known) -> None:
    assert check_page(help_list(list(subcommands(known.parser))), PAGE, known) == []


def test_a_help_list_out_of_order_or_with_a_command_too_many_is_reported(known: Known) -> None:
    names = list(subcommands(known.parser))
    swapped = check_page(help_list([names[1], names[0], *names[2:]]), PAGE, known)
    assert any("the order differs" in problem for problem in swapped), swapped
    extra = check_page(help_list([*names, "deploy"]), PAGE, known)
    assert any("not commands: ['deploy']" in problem for problem in extra), extra
    dropped = check_page(help_list(names[:-1]), PAGE, known)
    assert any(f"missing: ['{names[-1]}']" in problem for problem in dropped), dropped


def test_a_long_readme_or_a_late_quick_start_is_reported() -> None:
    good = "# R\n\n" + QUICK_START_HEADING + " (910C)\n\n1. step\n\n## Docs\n"
    assert check_shape(good) == []
    late = "# R\n" + "text\n" * 120 + QUICK_START_HEADING + "\n1. step\n"
    assert any("ends at line" in p for p in check_shape(late))
    long = good + "more\n" * README_MAX_LINES
    assert any("keep it under" in p for p in check_shape(long))
    assert any("no '## Host quick start'" in p for p in check_shape("# R\n"))
