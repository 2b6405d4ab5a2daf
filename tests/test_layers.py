"""The layering the design promises: a framework-free rules core, imports pointing down only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("gymnasium", "pettingzoo", "torch")


def _loaded_after(code: str) -> list[str]:
    """The heavy frameworks a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


@pytest.mark.parametrize(
    "module",
    [
        "butifarra_env",
        "butifarra_env.core.cards",
        "butifarra_env.core.actions",
        "butifarra_env.core.rules",
        "butifarra_env.core.game",
        "butifarra_env.core.observation",
        "butifarra_env.core.options",
        "butifarra_env.core.validate",
        "butifarra_env.records.format",
        "butifarra_env.core.render",
    ],
)
def test_rules_core_loads_no_framework(module: str) -> None:
    assert _loaded_after(f"import {module}") == []


def test_agents_and_the_batched_engine_load_no_framework_until_asked() -> None:
    assert _loaded_after("import agents, agents.rule_based, butifarra_env.envs.batched") == []
    assert _loaded_after("from butifarra_env import BatchedEnv; BatchedEnv(2).reset()") == []


@pytest.mark.parametrize(
    "code",
    [
        "import butifarra_env\nimport gymnasium",  # the id is registered when Gymnasium loads
        "import gymnasium\nimport butifarra_env",  # or at once when Gymnasium is there already
    ],
)
def test_gymnasium_id_registered_in_either_import_order(code: str) -> None:
    probe = f"{code}\nenv = gymnasium.make('butifarra_env/Butifarra-v0', seat=1)\nenv.reset(seed=0)"
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True)


def test_import_contracts_hold() -> None:
    """Imports point down only (the contracts in pyproject.toml, checked by import-linter)."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is part of the dev extra"
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
