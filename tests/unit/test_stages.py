"""The judge's stages: the import contract (import-linter, pyproject.toml) holds, fails on a
planted upward import; every module of a stage is private and no stage imports another stage's
private module (its face is the boundary), each shown on a planted one; and the docs' module map
is the code's."""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import module_map  # noqa: E402

LINT = Path(sys.executable).with_name("lint-imports")
JUDGE = ROOT / "src" / "ref2va_accept"


def private_imports(judge: Path) -> list[str]:
    """Every import in a stage of another stage's private module (``ref2va_accept.planning.
    _budget``, or ``from ref2va_accept.planning import _budget``): file, line, what."""
    found = []
    for path in sorted(judge.rglob("*.py")):
        stage = path.relative_to(judge).parts[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            modules: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            for module in modules:
                parts = module.split(".")
                if (parts[0] == "ref2va_accept" and len(parts) > 2 and parts[1] != stage
                        and any(p.startswith("_") for p in parts[2:])):
                    found.append(f"{path.relative_to(judge)}:{node.lineno}: {module}")
    return sorted(set(found))


def _lint(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_stage_contract_holds() -> None:
    done = _lint(ROOT / "src", ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_a_planted_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src", tmp_path / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = tmp_path / "src" / "ref2va_accept" / "core" / "_hashing.py"
    planted.write_text(planted.read_text(encoding="utf-8")
                       + "\nfrom ref2va_accept.judging import judge  # planted\n",
                       encoding="utf-8")
    done = _lint(tmp_path / "src", tmp_path)
    assert done.returncode != 0, done.stdout
    assert "ref2va_accept.core is not allowed to import ref2va_accept.judging" in done.stdout
    assert "ref2va_accept.core._hashing -> ref2va_accept.judging" in done.stdout


def public_modules(judge: Path) -> list[str]:
    """The modules of a stage (or of a stage's subpackage) whose names are public. The convention:
    every module is private (``_budget.py``), and the package's face (``__init__.py``) is where
    its names live for the other stages; ``__main__.py`` is Python's."""
    return sorted(str(p.relative_to(judge)) for p in judge.rglob("*.py")
                  if len(p.relative_to(judge).parts) > 1 and not p.name.startswith("_"))


@pytest.mark.fast
def test_every_module_of_a_stage_is_private() -> None:
    assert public_modules(JUDGE) == []


@pytest.mark.fast
def test_a_planted_public_module_is_found(tmp_path: Path) -> None:
    judge = tmp_path / "ref2va_accept"
    (judge / "planning" / "_inner").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "_budget.py", "_inner/__init__.py",
                 "_inner/_part.py"):
        (judge / "planning" / name).write_text("")
    (judge / "__init__.py").write_text("")
    assert public_modules(judge) == []
    (judge / "planning" / "budget.py").write_text("")  # planted
    (judge / "planning" / "_inner" / "part.py").write_text("")  # planted
    assert public_modules(judge) == ["planning/_inner/part.py", "planning/budget.py"]


@pytest.mark.fast
def test_no_stage_imports_another_stages_private_module() -> None:
    assert private_imports(JUDGE) == []


@pytest.mark.fast
def test_a_planted_private_import_is_found(tmp_path: Path) -> None:
    judge = tmp_path / "ref2va_accept"
    for stage in ("cli", "planning"):
        (judge / stage).mkdir(parents=True)
        (judge / stage / "__init__.py").write_text("")
    (judge / "planning" / "_budget.py").write_text("from ref2va_accept.planning import _disk\n")
    (judge / "cli" / "_plan.py").write_text(
        "import ref2va_accept.planning\nfrom ref2va_accept.planning import check_budget\n"
        "from ref2va_accept.planning import _budget as budget  # planted\n"
        "import ref2va_accept.planning._disk  # planted\n")
    assert private_imports(judge) == [
        "cli/_plan.py:3: ref2va_accept.planning._budget",
        "cli/_plan.py:4: ref2va_accept.planning._disk"]


@pytest.mark.fast
def test_every_stage_is_in_the_contract_and_has_its_own_docstring() -> None:
    stages = module_map.stage_order()
    judge = ROOT / "src" / "ref2va_accept"
    packages = {p.parent.name for p in judge.glob("*/__init__.py")}
    assert set(stages) <= packages
    assert packages - set(stages) == {"plugin"} - set(stages)
    for stage in stages:
        assert module_map.summary(judge / stage / "__init__.py"), stage


def face_exports(stage: str) -> dict[str, tuple[str, str]]:
    """Each name a stage's face takes from the stage's own modules, with the module and the name
    it has there: an import (``from ref2va_accept.planning._budget import check_budget``), or,
    in a face that loads its names when first used (quality), an entry of its ``_WHERE``."""
    tree = ast.parse((JUDGE / stage / "__init__.py").read_text(encoding="utf-8"))
    names: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if (isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith(f"ref2va_accept.{stage}.")):
            names.update({a.asname or a.name: (node.module, a.name) for a in node.names})
        elif (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id == "_WHERE"):
            where = ast.literal_eval(node.value)
            names.update({n: (f"ref2va_accept.{stage}.{m}", n) for n, m in where.items()})
    return names


@pytest.mark.fast
def test_a_stage_exports_what_its_private_modules_define() -> None:
    for stage in module_map.stage_order():
        package = importlib.import_module(f"ref2va_accept.{stage}")
        exported = list(getattr(package, "__all__", ()))
        assert len(exported) == len(set(exported)), f"{stage}.__all__ names a name twice"
        own = face_exports(stage)
        if stage != "plugin":  # the plugin's face is pytest's entry point, not other stages'
            assert sorted(exported) == sorted(own), stage
        for name, (module, defined) in own.items():
            value = getattr(importlib.import_module(module), defined)
            assert getattr(package, name) is value, f"{stage}.{name}"
        for name in exported:
            assert getattr(package, name) is not None, f"{stage}.{name}"
        with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
            package.no_such_name  # noqa: B018


@pytest.mark.fast
def test_a_stage_face_imports_its_names_unless_they_are_heavy() -> None:
    # Faces import their names (as httpx's and pytest's do). Quality's loads them when first
    # used, as OpenCV, scipy and torch come with them (judging's lossy gate imports its scorers
    # when it scores, so judging's face imports its names too).
    lazy = {stage for stage in module_map.stage_order()
            if "__getattr__" in vars(importlib.import_module(f"ref2va_accept.{stage}"))}
    assert lazy <= {"quality"}


@pytest.mark.fast
def test_the_docs_module_map_is_the_codes() -> None:
    doc = module_map.DOC.read_text(encoding="utf-8")
    held = module_map.current(doc)
    assert held is not None, "docs/architecture.md has lost its module map markers"
    assert held == module_map.module_map(), (
        "docs/architecture.md's module map is not the code's: run "
        "`python scripts/module_map.py --write`")


@pytest.mark.fast
def test_the_map_check_fails_on_a_stale_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "architecture.md"
    made = module_map.module_map()
    stale.write_text("# Architecture\n\n" + made.replace("| what it is |", "| what it was |", 1),
                     encoding="utf-8")
    monkeypatch.setattr(module_map, "DOC", stale)
    monkeypatch.setattr(module_map, "ROOT", tmp_path)
    assert module_map.main(["--check"]) == 1
    assert "module map is not the code's" in capsys.readouterr().err
    assert module_map.main(["--write"]) == 0
    assert module_map.main(["--check"]) == 0
