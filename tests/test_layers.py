"""The layering the design promises: a framework-free rules core, imports pointing down only."""

from __future__ import annotations

import pkgutil
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


CORE = sorted(
    f"butifarra_env.core.{m.name}"
    for m in pkgutil.iter_modules([str(ROOT / "butifarra_env" / "core")])  # not imported here
)
# Above the core and below the environments / training: the records, the arena, the
# evaluation protocol, the deal sets and the statistics are plain Python and numpy too.
FRAMEWORK_FREE = [
    "butifarra_env",
    "butifarra_env.core",
    "butifarra_env.records",
    "butifarra_env.records.format",
    "butifarra_env.records.files",
    "butifarra_env.records.replay",
    "agents.evaluation",
    "agents.evaluation.arena",
    "agents.evaluation.protocol",
    "agents.evaluation.deal_sets",
    "agents.evaluation.stats",
]


def test_the_walk_finds_the_core_and_the_probe_sees_frameworks() -> None:
    assert {"butifarra_env.core.rules", "butifarra_env.core.game"} <= set(CORE)
    assert _loaded_after("import butifarra_env.envs.aec") == ["gymnasium", "pettingzoo"]


@pytest.mark.parametrize("module", CORE + FRAMEWORK_FREE)
def test_module_loads_no_framework(module: str) -> None:
    assert _loaded_after(f"import {module}") == []


def test_replaying_and_streaming_records_load_no_framework(tmp_path: Path) -> None:
    """Not only importing: reading a records file and replaying it on Game stay framework-free."""
    code = f"""
import numpy as np
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import random_deal
from butifarra_env.records import game_record, iter_records, replay_game, save_records
rng = np.random.default_rng(0)
game = Game(Options(), 0, random_deal(rng, 0))
while not game.is_over:
    legal = game.legal_actions()
    game.step(legal[rng.integers(len(legal))])
path = {str(tmp_path / "r.jsonl")!r}
save_records(path, [game_record(game)])
replayed = [replay_game(r) for r in iter_records(path)]
assert replayed[0].scores == game.scores
"""
    assert _loaded_after(code) == []


def test_the_arena_and_the_protocol_play_without_a_framework() -> None:
    code = (
        "from agents.evaluation.arena import duel\n"
        "from agents.evaluation.protocol import evaluate\n"
        "assert duel('rule', 'random', 2, seed=0).n_deals == 2\n"
        "card = evaluate('rule', deal_set='dev', n_deals=2, workers=1, progress=False,\n"
        "                panel=['random', 'rule'])\n"
        "assert not card.failed"
    )
    assert _loaded_after(code) == []


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


def test_gymnasium_id_registered_after_a_find_spec_probe() -> None:
    """``importlib.util.find_spec("gymnasium")`` before the import (torchrl does it) must not
    use up the hook that registers the id."""
    probe = (
        "import butifarra_env, importlib.util\n"
        "importlib.util.find_spec('gymnasium')\n"
        "import gymnasium\n"
        "assert butifarra_env.GYM_ID in gymnasium.registry\n"
        "gymnasium.make(butifarra_env.GYM_ID).reset(seed=0)"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True)
