"""The torch pipeline itself: determinism, comparison points, and what a request without
diagnostics costs (nothing written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.reference.errors import ApiError
from engine.reference.generator import video_latent_frames
from tests.engine.conftest import REPO_ROOT, engine_env
from tests.engine.pipeline_harness import (
    SPEC,
    STEPS,
    Monitor,
    Run,
    first_difference,
    generator,
    run,
)

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def b0_twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    """Two runs of the same request on one B0 engine in this process: the determinism test
    compares them, the shape and other-process tests read the first (each made its own)."""
    root = tmp_path_factory.mktemp("b0")
    with pytest.MonkeyPatch.context() as monkeypatch:
        engine = generator(monkeypatch, root)
        return run(engine, root / "a"), run(engine, root / "b")


# The script another Python process runs: B0 built there (its kernel settings and the modules
# that building it loaded are printed), then the same run as here into sys.argv[1]/there.
ANOTHER_PROCESS = (
    "import sys, json, torch, pytest; from pathlib import Path;"
    "from tests.engine.pipeline_harness import generator, run;"
    "engine = generator(pytest.MonkeyPatch(), Path(sys.argv[1]));"
    "print(json.dumps({'deterministic': torch.are_deterministic_algorithms_enabled(),"
    " 'warn_only': torch.is_deterministic_algorithms_warn_only_enabled(),"
    " 'compiler_loaded': [m for m in sys.modules"
    " if m.startswith(('torch._inductor', 'torch._dynamo'))]}), flush=True);"
    "run(engine, Path(sys.argv[1]) / 'there')"
)


@pytest.fixture(scope="module")
def another_process(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], Run]:
    """One fresh Python process builds B0 and runs the request: what building it set and loaded
    there, and its run. Both tests that need another process read this one (each started its
    own: most of the cost is the process importing torch)."""
    root = tmp_path_factory.mktemp("another-process")
    done = subprocess.run([sys.executable, "-c", ANOTHER_PROCESS, str(root)], cwd=REPO_ROOT,
                          env=engine_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[0]), Run(root / "there", [], None)


def test_same_seed_twice_gives_identical_dumps_and_frames(b0_twice: tuple[Run, Run]) -> None:
    first, second = b0_twice
    assert len(first.points()) == 7 + STEPS
    assert first.points() == second.points()
    assert first_difference(first, second) is None
    assert all(np.array_equal(a, b) for a, b in zip(first.frames, second.frames, strict=True))


def test_another_process_gives_identical_dumps(
    b0_twice: tuple[Run, Run], another_process: tuple[dict[str, object], Run]
) -> None:
    here, (_, there) = b0_twice[0], another_process
    assert here.points() == there.points()
    assert first_difference(here, there) is None


def test_kernels_are_deterministic_without_loading_the_compiler(
    another_process: tuple[dict[str, object], Run]
) -> None:
    # Deterministic kernels (warn-only) as torch.use_deterministic_algorithms sets them, but
    # without importing torch._inductor: that import alone cost about 2 s of every engine start.
    # Read in a fresh process right after B0 is built there, before it runs anything.
    state, _ = another_process
    assert state["deterministic"] is True and state["warn_only"] is True
    assert state["compiler_loaded"] == [], state["compiler_loaded"]


def test_shapes_follow_h3(b0_twice: tuple[Run, Run]) -> None:
    result = b0_twice[0]
    assert video_latent_frames(124) == 37 and video_latent_frames(362) == 107
    assert len(result.frames) == SPEC.num_frames
    assert result.frames[0].shape == (32, 32, 3) and result.frames[0].dtype == np.uint8
    assert result.audio is not None
    assert result.audio.shape == (2, round(SPEC.num_frames / SPEC.fps * 32_000))
    enabled = result.enabled_path
    assert enabled["weights_sha256"] and enabled["compile"] == "eager"
    assert enabled["approximate"] == [] and enabled["cache"]["backend"] == "none"


def test_no_acceptance_block_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = generator(monkeypatch, tmp_path)
    media = engine.generate(SPEC, Monitor())
    assert len(list(media.frames)) == SPEC.num_frames
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("acceptance", "expected"),
    [
        ({"dump_dir": "/etc/elsewhere", "points": "all"}, "outside"),
        ({"dump_dir": "ROOT/a/../../x", "points": "all"}, ".."),
        ({"dump_dir": "relative/dir", "points": "all"}, "absolute"),
        ({"dump_dir": "ROOT/a", "points": ["cond.text", "dit.step999"]}, "dit.step999"),
        ({"dump_dir": "ROOT/a", "points": ["nope"]}, "valid names"),
    ],
    ids=["outside-root", "dotdot", "relative", "step-out-of-range", "unknown-point"],
)
def test_bad_acceptance_block_is_400(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, acceptance: dict[str, object], expected: str
) -> None:
    engine = generator(monkeypatch, tmp_path)
    block = json.loads(json.dumps(acceptance).replace("ROOT", str(tmp_path)))
    spec = SPEC.__class__(**{**SPEC.__dict__, "extra_params": {"acceptance": block}})
    with pytest.raises(ApiError) as caught:
        engine.validate(spec)
    assert caught.value.status_code == 400 and expected in caught.value.message


def test_diagnostics_without_a_root_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = generator(monkeypatch, tmp_path)
    monkeypatch.delenv("REF2VA_DIAGNOSTICS_ROOT")
    engine.roots = ()
    block = {"dump_dir": str(tmp_path / "a"), "points": "all"}
    spec = SPEC.__class__(**{**SPEC.__dict__, "extra_params": {"acceptance": block}})
    with pytest.raises(ApiError, match="REF2VA_DIAGNOSTICS_ROOT"):
        engine.validate(spec)
