#!/usr/bin/env bash
# tests/integrations/test_torchrl.py against the newest TorchRL, in a venv of its own.
#
# The main environment (.[all]) holds torchrl 0.13.x: AgileRL pins tensordict==0.13.0 and
# torchrl 0.14 needs tensordict >=0.14.3,<0.15, so the two cannot share one environment.
# This script checks the adapter against what `pip install butifarra-rl[torchrl]` gives a
# TorchRL user today. TORCHRL_VENV picks the venv's folder (made anew each run).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${TORCHRL_VENV:-${TMPDIR:-/tmp}/butifarra-torchrl-venv}"
python3 -m venv --clear "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0  # first: the CPU build from local disk, never CUDA's
python -m pip install -q -e ".[torchrl]" pytest
python - <<'PY'
import tensordict, torch, torchrl
print(f"torchrl {torchrl.__version__}, tensordict {tensordict.__version__}, torch {torch.__version__}")
PY
# The repo's addopts use pytest-xdist (-n 2), which this venv does not need: plain pytest.
python -m pytest tests/integrations/test_torchrl.py -o addopts="" -q -p no:cacheprovider \
    --strict-markers -W ignore::DeprecationWarning
