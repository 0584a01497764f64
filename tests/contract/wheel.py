"""The vLLM-Omni 0.30.0 release wheel, obtained once and verified by hash, read without installing.

The contract tests read upstream's sources statically: vllm_omni cannot be imported here (it needs
vLLM, torch and an accelerator platform), and importing it would run code we only want to read.
The wheel comes from `$REF2VA_VLLM_OMNI_WHEEL` (a local .whl, for offline machines) or from the
package index through pip, into a per-user cache so a second session finds it without a network.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PINNED_PROJECT = "vllm-omni"
PINNED_VERSION = "0.30.0"
PINNED_SHA256 = "141cb0c7b9c07970e5c92a99aab9696e81682dbfa3d2bfcde359c3c1533385f4"
WHEEL_ENV = "REF2VA_VLLM_OMNI_WHEEL"
# The wheel is ~20 MB; a slow index gets this long before the failure says how to go offline.
DOWNLOAD_TIMEOUT_S = 600.0
PACKAGE = "vllm_omni"


class WheelError(Exception):
    """The pinned wheel cannot be obtained or is not the pinned one (one line: what to do)."""


def offline_hint() -> str:
    return (
        f"to run offline, download {PINNED_PROJECT}=={PINNED_VERSION} "
        f"(sha256 {PINNED_SHA256}) on a machine with index access "
        f"(`python -m pip download --no-deps --only-binary=:all: "
        f"{PINNED_PROJECT}=={PINNED_VERSION} -d DIR`) and set {WHEEL_ENV}=DIR/<the .whl>"
    )


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ref2va" / "wheels"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path) -> Path:
    """The wheel at `path` if its sha256 is the pinned one; a WheelError naming both otherwise."""
    found = sha256_of(path)
    if found != PINNED_SHA256:
        raise WheelError(
            f"{path.name}: expected {PINNED_PROJECT}=={PINNED_VERSION} with sha256 "
            f"{PINNED_SHA256}, found sha256 {found}"
        )
    return path


def _cached(folder: Path) -> Path | None:
    # pip names the file itself; any matching wheel with the pinned hash will do.
    for candidate in sorted(folder.glob(f"{PACKAGE}-{PINNED_VERSION}-*.whl")):
        if sha256_of(candidate) == PINNED_SHA256:
            return candidate
    return None


def _pip_download(folder: Path, timeout_s: float, env: Mapping[str, str]) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", f"{PINNED_PROJECT}=={PINNED_VERSION}", "-d", str(folder)]
    # Own process group: on timeout pip and anything it started are ended together.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(env))
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise WheelError(
            f"pip download of {PINNED_PROJECT}=={PINNED_VERSION} did not finish within "
            f"{timeout_s:g} s; {offline_hint()}"
        ) from None
    if proc.returncode != 0:
        last = next((ln for ln in reversed(out.splitlines()) if ln.strip()), "no output")
        raise WheelError(
            f"pip download of {PINNED_PROJECT}=={PINNED_VERSION} failed "
            f"(exit {proc.returncode}: {last.strip()}); {offline_hint()}"
        )


def obtain(env: Mapping[str, str] | None = None,
           timeout_s: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """The verified pinned wheel: from `$REF2VA_VLLM_OMNI_WHEEL`, else the cache, else pip."""
    env = os.environ if env is None else env
    given = env.get(WHEEL_ENV)
    if given:
        path = Path(given)
        if not path.is_file():
            raise WheelError(f"{WHEEL_ENV}: a local {PACKAGE} .whl file, found no file at {given}")
        return verify(path)
    folder = cache_dir(env)
    found = _cached(folder) if folder.is_dir() else None
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    _pip_download(folder, timeout_s, env)
    wheels = sorted(folder.glob(f"{PACKAGE}-{PINNED_VERSION}-*.whl"))
    if not wheels:
        raise WheelError(
            f"pip download reported success but left no {PACKAGE}-{PINNED_VERSION}-*.whl in the "
            f"cache; {offline_hint()}"
        )
    for wheel in wheels:
        verify(wheel)
    return wheels[0]


@dataclass(frozen=True)
class SourceTree:
    """Upstream sources by their path inside the wheel ("vllm_omni/..."), from a .whl or a folder.

    A folder is what the mutation test points at: an extracted, edited copy of the wheel.
    """

    root: Path

    def _zip(self) -> zipfile.ZipFile:
        return zipfile.ZipFile(self.root)

    def paths(self) -> list[str]:
        if self.root.is_dir():
            return sorted(p.relative_to(self.root).as_posix()
                          for p in (self.root / PACKAGE).rglob("*.py"))
        with self._zip() as zf:
            return sorted(n for n in zf.namelist()
                          if n.startswith(f"{PACKAGE}/") and n.endswith(".py"))

    def read(self, path: str) -> str | None:
        """The text of one source file, or None when the wheel has no such file."""
        if self.root.is_dir():
            file = self.root / path
            return file.read_text(encoding="utf-8") if file.is_file() else None
        with self._zip() as zf:
            try:
                return zf.read(path).decode("utf-8")
            except KeyError:
                return None

    def read_all(self, prefix: str = "") -> Iterator[tuple[str, str]]:
        """(path, text) for every .py file under `prefix`, opening the archive once."""
        if self.root.is_dir():
            for path in self.paths():
                if path.startswith(prefix):
                    text = self.read(path)
                    if text is not None:
                        yield path, text
            return
        with self._zip() as zf:
            for name in sorted(zf.namelist()):
                if name.startswith(f"{PACKAGE}/") and name.endswith(".py") \
                        and name.startswith(prefix):
                    yield name, zf.read(name).decode("utf-8")

    def extract_to(self, dest: Path) -> Path:
        """A writable copy of the package sources under `dest` (for mutation tests)."""
        with self._zip() as zf:
            for name in zf.namelist():
                if name.startswith(f"{PACKAGE}/"):
                    zf.extract(name, dest)
        return dest
