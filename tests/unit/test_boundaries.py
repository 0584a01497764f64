"""The judge and the judged never import each other; both import the contract between them
(`ref2va_contract`), which imports neither and nothing outside the standard library.
Every import counts: module level, inside functions and under TYPE_CHECKING
(docs/architecture.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
JUDGE, ENGINE, CONTRACT = "src/ref2va_accept", "engine", "src/ref2va_contract"


def _imports(folder: Path) -> list[tuple[Path, str]]:
    """(file, module) of every absolute import under a folder."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found += [(path, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((path, node.module))
    return found


def _top(module: str) -> str:
    return module.split(".", 1)[0]


@pytest.mark.parametrize("side, other", [(JUDGE, "engine"), (ENGINE, "ref2va_accept")])
def test_side_does_not_import_the_other(side: str, other: str) -> None:
    offending = [f"{p.relative_to(ROOT)}: {m}" for p, m in _imports(ROOT / side)
                 if _top(m) == other]
    assert offending == []


@pytest.mark.parametrize("side", [JUDGE, ENGINE])
def test_both_sides_read_the_contract(side: str) -> None:
    assert any(_top(m) == "ref2va_contract" for _, m in _imports(ROOT / side))


def test_the_contract_imports_only_the_standard_library() -> None:
    found = _imports(ROOT / CONTRACT)
    offending = [f"{p.relative_to(ROOT)}: {m}" for p, m in found
                 if _top(m) not in sys.stdlib_module_names]
    assert offending == []
    assert {p.name for p, _ in found} >= {"api.py", "launch.py", "diagnostics.py"}


def test_the_contract_is_installed_with_the_judge() -> None:
    # pyproject's `packages.find where=src` ships every package under src/.
    text = (ROOT / "pyproject.toml").read_text()
    assert '[tool.setuptools.packages.find]\nwhere = ["src"]' in text
    assert (ROOT / CONTRACT / "__init__.py").is_file()


def test_test_modules_have_unique_basenames() -> None:
    """The suite's folders are not packages, so pytest imports each test module by its basename:
    two `test_x.py` in different folders break the collection of `tests` as a whole (the
    campaign's `pytest tests -m ...` and every suite run of the self-tests)."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
