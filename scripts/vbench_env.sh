#!/usr/bin/env bash
# Build (once) the environment that runs upstream VBench's own dimension code:
#   scripts/vbench_env.sh [DIR]      (default .venv-vbench; prints DIR/bin/python)
# It holds torch 2.14.1 with torchvision 0.29.1 (about 6 GB, taken from this machine's disk where
# pip finds them), VBench 0.1.5 without its pins, pyiqa, DreamSim and OpenAI's clip package, and
# this checkout's judge (src/) on its path. A stamp keyed on scripts/vbench-env.txt marks it done.
# One build at a time: a second call waits on DIR.lock for the first (CI starts the build early,
# beside its other set-up, and the upstream comparison's fixture then finds it done).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.venv-vbench}
PYTHON=${PYTHON:-python3}
exec 9>"$DIR.lock"
flock 9
stamp="$DIR/.installed-$(sha256sum scripts/vbench-env.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "vbench_env: building $DIR (torch 2.14.1 + torchvision 0.29.1, VBench 0.1.5)" >&2
    rm -rf "$DIR"
    "$PYTHON" -m venv "$DIR"
    "$DIR/bin/python" -m pip install --quiet --upgrade pip
    # --no-compile: bytecode for the modules the comparison imports is written as they are first
    # imported (./ref2va unsets PYTHONDONTWRITEBYTECODE), not for all of torch's and CUDA's.
    constraints=$(mktemp)
    trap 'rm -f "$constraints"' EXIT
    grep -E '^(torch|torchvision)==' scripts/vbench-env.txt > "$constraints"
    "$DIR/bin/python" -m pip install --quiet --no-compile -c "$constraints" -r scripts/vbench-env.txt
    "$DIR/bin/python" -m pip install --quiet --no-compile --no-deps vbench==0.1.5
    # The judge's package from this checkout, without its dependencies (those it needs are above):
    # its src/ on the path, by a .pth file, rather than an editable install, which would write
    # src/*.egg-info while the judge's own .venv may be installing the same checkout.
    purelib=$("$DIR/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    echo "$PWD/src" > "$purelib/ref2va-checkout.pth"
    "$DIR/bin/python" -c 'import torch, torchvision, vbench.temporal_flickering, pyiqa, dreamsim
import ref2va_accept.quality'
    rm -f "$DIR"/.installed-*
    touch "$stamp"
fi
echo "$DIR/bin/python"
