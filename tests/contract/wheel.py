"""The vLLM-Omni 0.30.0 release wheel (and the vLLM and Cache-DiT releases it is built on), each
obtained once and verified by hash, read without installing.

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


@dataclass(frozen=True)
class Pin:
    """One release wheel the contract reads: its project, version, sha256, the variable that
    names a local copy, the package folder inside it, and pip's platform options (vLLM's wheel
    is per platform; its Python sources are the same on every one, so one is pinned)."""

    project: str
    version: str
    sha256: str
    env: str
    package: str
    platform: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        return f"{self.project}=={self.version}"


# vLLM-Omni itself (~20 MB); the vLLM release it is built on, whose `vllm serve` parser defines
# the base flags the profiles use (~315 MB, the x86_64 manylinux wheel: pip fetches it on any
# machine with these options); and the Cache-DiT release the wheel pins (`cache-dit==1.5.0`).
OMNI = Pin("vllm-omni", "0.30.0",
           "141cb0c7b9c07970e5c92a99aab9696e81682dbfa3d2bfcde359c3c1533385f4",
           "REF2VA_VLLM_OMNI_WHEEL", "vllm_omni")
VLLM = Pin("vllm", "0.30.0", "ef52ee58c410ead0b8afb190838fa4cbcb52075596f67862a03859d984966ac4",
           "REF2VA_VLLM_WHEEL", "vllm",
           ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
            "--implementation", "cp"))
CACHE_DIT = Pin("cache-dit", "1.5.0",
                "780aedb081db06eaf32bcf63de7e200603a596a5c92f78c73cacf8d32c7be895",
                "REF2VA_CACHE_DIT_WHEEL", "cache_dit")

PINNED_PROJECT = OMNI.project
PINNED_VERSION = OMNI.version
PINNED_SHA256 = OMNI.sha256
WHEEL_ENV = OMNI.env
# A slow index gets this long before the failure says how to go offline.
DOWNLOAD_TIMEOUT_S = 600.0
PACKAGE = OMNI.package


class WheelError(Exception):
    """The pinned wheel cannot be obtained or is not the pinned one (one line: what to do)."""


def offline_hint(pin: Pin = OMNI) -> str:
    platform = " ".join(pin.platform)
    return (
        f"to run offline, download {pin.spec} "
        f"(sha256 {pin.sha256}) on a machine with index access "
        f"(`python -m pip download --no-deps --only-binary=:all: "
        + (f"{platform} " if platform else "")
        + f"{pin.spec} -d DIR`) and set {pin.env}=DIR/<the .whl>"
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


def verify(path: Path, pin: Pin = OMNI) -> Path:
    """The wheel at `path` if its sha256 is the pinned one; a WheelError naming both otherwise."""
    found = sha256_of(path)
    if found != pin.sha256:
        raise WheelError(
            f"{path.name}: expected {pin.spec} with sha256 {pin.sha256}, found sha256 {found}"
        )
    return path


def _cached(folder: Path, pin: Pin = OMNI) -> Path | None:
    # pip names the file itself; any matching wheel with the pinned hash will do.
    for candidate in sorted(folder.glob(f"{pin.package}-{pin.version}-*.whl")):
        if sha256_of(candidate) == pin.sha256:
            return candidate
    return None


def _pip_download(folder: Path, timeout_s: float, env: Mapping[str, str],
                  pin: Pin = OMNI) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", *pin.platform, pin.spec, "-d", str(folder)]
    # Own process group: on timeout pip and anything it started are ended together.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(env))
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise WheelError(
            f"pip download of {pin.spec} did not finish within "
            f"{timeout_s:g} s; {offline_hint(pin)}"
        ) from None
    if proc.returncode != 0:
        last = next((ln for ln in reversed(out.splitlines()) if ln.strip()), "no output")
        raise WheelError(
            f"pip download of {pin.spec} failed "
            f"(exit {proc.returncode}: {last.strip()}); {offline_hint(pin)}"
        )


def obtain(env: Mapping[str, str] | None = None,
           timeout_s: float = DOWNLOAD_TIMEOUT_S, pin: Pin = OMNI) -> Path:
    """The verified pinned wheel: from `$<pin.env>` (`$REF2VA_VLLM_OMNI_WHEEL` for vLLM-Omni),
    else the cache, else pip."""
    env = os.environ if env is None else env
    given = env.get(pin.env)
    if given:
        path = Path(given)
        if not path.is_file():
            raise WheelError(f"{pin.env}: a local {pin.package} .whl file, found no file at "
                             f"{given}")
        return verify(path, pin)
    folder = cache_dir(env)
    found = _cached(folder, pin) if folder.is_dir() else None
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    _pip_download(folder, timeout_s, env, pin)
    wheels = sorted(folder.glob(f"{pin.package}-{pin.version}-*.whl"))
    if not wheels:
        raise WheelError(
            f"pip download reported success but left no {pin.package}-{pin.version}-*.whl in "
            f"the cache; {offline_hint(pin)}"
        )
    for wheel in wheels:
        verify(wheel, pin)
    return wheels[0]


@dataclass(frozen=True)
class SourceTree:
    """Upstream sources by their path inside the wheel ("vllm_omni/..."), from a .whl or a folder.

    A folder is what the mutation test points at: an extracted, edited copy of the wheel.
    """

    root: Path
    package: str = PACKAGE  # the top-level folder read ("vllm", "cache_dit" for the others)

    def _zip(self) -> zipfile.ZipFile:
        return zipfile.ZipFile(self.root)

    def paths(self) -> list[str]:
        if self.root.is_dir():
            return sorted(p.relative_to(self.root).as_posix()
                          for p in (self.root / self.package).rglob("*.py"))
        with self._zip() as zf:
            return sorted(n for n in zf.namelist()
                          if n.startswith(f"{self.package}/") and n.endswith(".py"))

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
                if name.startswith(f"{self.package}/") and name.endswith(".py") \
                        and name.startswith(prefix):
                    yield name, zf.read(name).decode("utf-8")

    def extract_to(self, dest: Path) -> Path:
        """A writable copy of the package's Python sources under `dest` (for mutation tests;
        vLLM's compiled parts are left in the wheel: nothing here reads them)."""
        with self._zip() as zf:
            for name in zf.namelist():
                if name.startswith(f"{self.package}/") and name.endswith(".py"):
                    zf.extract(name, dest)
        return dest
