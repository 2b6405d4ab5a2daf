#!/usr/bin/env bash
# tests/integrations/test_pufferlib.py in a venv of its own (not run by .ci/run by default).
#
# pufferlib-core 3.0.x requires torch==2.9.0 (its CUDA build); only torch 2.13 (CPU) is on
# local disk, so it goes in with --no-deps, beside torch 2.13 and its other requirements. Its
# Python layers (emulation, vector, pytorch, models, pufferl) import and run on the CPU; its
# compiled pufferlib._C needs CUDA torch (libc10_cuda.so) and is not loaded, which the test
# works around for PuffeRL.train's one kernel. `pip install pufferlib` (the full package)
# builds C environments by downloading raylib and fails offline. PUFFERLIB_VENV picks the
# venv's folder (made anew each run).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${PUFFERLIB_VENV:-${TMPDIR:-/tmp}/butifarra-pufferlib-venv}"
python3 -m venv --clear "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0  # first: the CPU build from local disk, never CUDA's
python -m pip install -q -e . pytest
# pufferlib-core's requirements, less its torch pin
python -m pip install -q psutil rich rich-argparse pyro-ppl nvidia-ml-py setuptools
python -m pip install -q --no-deps "pufferlib-core>=3.0"
python -m pip show pufferlib-core torch | grep -E "^(Name|Version)"
python -m pytest tests/integrations/test_pufferlib.py -o addopts="" -q -p no:cacheprovider \
    --strict-markers -W ignore::DeprecationWarning
