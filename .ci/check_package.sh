#!/usr/bin/env bash
# The package as users get it: build the sdist and, from it, the wheel (so a file missing
# from the sdist shows up); install the wheel, not editable, into a fresh virtual environment;
# run the demo and the evaluation from outside the repository (so missing package data, such
# as the checkpoint, the deal sets or the web assets, shows up).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
  cat "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/*.whl)"
echo "built: $(cd "$work/dist" && ls)"

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q torch==2.13.0
"$work/venv/bin/python" -m pip install -q "${wheel}[train]"

cd "$work"  # outside the repository: only the installed package can be imported
"$work/venv/bin/python" - "$repo" <<'PY'
import sys
import agents, butifarra_env
repo = sys.argv[1]
for module in (agents, butifarra_env):
    assert not module.__file__.startswith(repo), f"{module.__name__} imported from the repo"
print("installed package:", butifarra_env.__file__)
PY
"$work/venv/bin/butifarra" --version
"$work/venv/bin/butifarra" demo --deals 50 --workers 1
"$work/venv/bin/butifarra" eval ppo --deals 4 --no-progress --json "$work/card.json"
"$work/venv/bin/python" -c "import json,sys; c=json.load(open(sys.argv[1])); print('card:', c['deal_set'], c['package_version'])" "$work/card.json"
echo "package check passed"
