"""What importing the judge loads, seen from a fresh interpreter (this session has imported
everything already): neither OpenCV, scipy nor torch until scoring needs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.suite_runner import ROOT


def _heavy_modules_after_import(module: str) -> list[str]:
    """Import ``module`` in a fresh interpreter (this checkout's sources first on the path) and
    list which of OpenCV and scipy it loaded."""
    import ref2va_accept

    src = str(Path(ref2va_accept.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    script = (f"import sys, {module}; "
              "print(','.join(m for m in ('cv2', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, f"importing {module} failed: {done.stderr.strip()}"
    return [name for name in done.stdout.strip().split(",") if name]


def test_importing_media_loads_neither_opencv_nor_scipy() -> None:
    # Unit-test sessions import media; OpenCV and scipy belong where scoring happens.
    assert _heavy_modules_after_import("ref2va_accept.media") == []
    # The probe can see a heavy import: loudness needs scipy.
    assert "scipy" in _heavy_modules_after_import("ref2va_accept.quality._loudness")


def test_loading_the_plugin_imports_neither_opencv_nor_scipy() -> None:
    # A fresh interpreter: this session has imported them already.
    code = ("import sys\n"
            "import ref2va_accept.plugin\n"
            "for name in ('_selection', '_engines', '_run_evidence', '_reporting', '_state'):\n"
            "    __import__('ref2va_accept.plugin.' + name)\n"
            "print(sorted(m for m in ('cv2', 'scipy', 'torch') if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT / "src"), str(ROOT)))}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=120, check=True)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
