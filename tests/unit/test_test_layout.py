"""The suite's own layout: no module under tests/ imports a test module (a `test_*.py`). What
tests share lives in helper modules without the prefix (tests/unit/latency_doubles.py and the
like) or in conftest fixtures. pytest imports a test module by its basename (the suite's folders
are not packages), so an importer that names it `tests.unit.test_x` loads a second copy of it,
and moving or renaming a test would break tests elsewhere. Every import counts: module level and
inside functions, absolute and relative."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def _imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import names, as written (relative ones with their leading dots): for
    `from a.b import c` a.b, and a.b.c too where a.b may be a package of the suite (tests, or
    relative), whose test modules can be imported by name."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = "." * node.level + (node.module or "")
    in_suite = node.level > 0 or (node.module or "").split(".", 1)[0] == "tests"
    names = [base + alias.name if base.endswith(".") else f"{base}.{alias.name}"
             for alias in node.names] if in_suite else []
    return [base, *names] if node.module else names


def imports_of_test_modules(root: Path) -> list[str]:
    """`file:line: imports module` for each import of a test module by a .py file under
    root/tests (file relative to root)."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        lines = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                lines += [(node.lineno, m) for m in _imported_modules(node) if _is_test_module(m)]
        found += [f"{path.relative_to(root)}:{line}: imports {module}"
                  for line, module in sorted(lines)]
    return found


def test_no_module_of_the_suite_imports_a_test_module() -> None:
    assert (ROOT / "tests" / "conftest.py").is_file()  # the suite's root: the scan sees it all
    found = imports_of_test_modules(ROOT)
    assert found == [], (
        "a module imports a test module; move what it shares into a helper module without the "
        "test_ prefix (or a conftest fixture) and import it from there:\n" + "\n".join(found))


HELPER = '''"""What the fake suite's tests share."""


def shared() -> int:
    return 1
'''

TEST_A = '''"""A test module of the fake suite."""

from tests.unit.helpers import shared


def test_a() -> None:
    assert shared() == 1
'''


@pytest.mark.parametrize(("planted", "module"), [
    ("from tests.unit.test_a import shared", "tests.unit.test_a"),
    ("import tests.unit.test_a", "tests.unit.test_a"),
    ("import tests.unit.test_a as a", "tests.unit.test_a"),
    ("from tests.unit import helpers, test_a", "tests.unit.test_a"),
    ("from .test_a import shared", ".test_a"),
    ("from . import test_a", ".test_a"),
    ("from ..unit.test_a import shared", "..unit.test_a"),
])
def test_a_planted_import_of_a_test_module_is_found(tmp_path: Path, planted: str,
                                                    module: str) -> None:
    unit = tmp_path / "tests" / "unit"
    unit.mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text('"""Fixtures."""\n')
    (unit / "helpers.py").write_text(HELPER)
    (unit / "test_a.py").write_text(TEST_A)
    body = ['"""Another test module of the fake suite."""', "",
            "from tests.unit.helpers import shared", "", "",
            "def test_b() -> None:", "    assert shared() == 1"]
    (unit / "test_b.py").write_text("\n".join(body) + "\n")
    # Test modules that import helpers, helpers, and conftest: nothing to find.
    assert imports_of_test_modules(tmp_path) == []
    # Planted inside the test function (line 7) and at module level (line 4) alike.
    (unit / "test_b.py").write_text("\n".join([*body[:6], f"    {planted}", *body[6:]]) + "\n")
    assert imports_of_test_modules(tmp_path) == [f"tests/unit/test_b.py:7: imports {module}"]
    (unit / "test_b.py").write_text("\n".join([*body[:3], planted, *body[3:]]) + "\n")
    assert imports_of_test_modules(tmp_path) == [f"tests/unit/test_b.py:4: imports {module}"]
    # A helper module is held to it as well.
    (unit / "test_b.py").write_text("\n".join(body) + "\n")
    (unit / "helpers.py").write_text(HELPER + f"\n\n{planted}\n")
    assert imports_of_test_modules(tmp_path) == [f"tests/unit/helpers.py:8: imports {module}"]
