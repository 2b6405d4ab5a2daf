"""``benchmarks/search_vs_ismcts.py`` on two deals with tiny settings: both agents reported,
numbers that agree with each other, the same seed giving the same result, no overwriting.

Skips without OpenSpiel (``pip install open_spiel``) or torch (the PPO opponent).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from agents.evaluation.stats import mean_ci
from tests.extras import need

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--deals", "2", "--seed", "3", "--search", "search:samples=2,endgame=1,infer=0"]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    need("pyspiel")
    need("torch")
    path = ROOT / "benchmarks" / "search_vs_ismcts.py"
    spec = importlib.util.spec_from_file_location("search_vs_ismcts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(bench: ModuleType, out: Path, *extra: str) -> dict[str, Any]:
    assert bench.main([*TINY, *extra, "--out", str(out)]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_both_agents_reported_and_reproducible(bench: ModuleType, tmp_path: Path) -> None:
    first = _run(bench, tmp_path / "a.json", "--simulations", "4")
    assert first["deals"] == 2 and first["seed"] == 3 and first["deal_set"] == "dev_v1"
    assert "max_doubling_level=4" in first["game"]  # the default game, as in butifarra arena
    assert first["ismcts"] == {"simulations": 4, "rollouts": 1, "uct_c_per_multiplier": 72.0}
    assert first["calibration"] is None
    ismcts, search = first["agents"]
    assert (ismcts["agent"], search["agent"]) == ("ismcts", "search")
    for r in (ismcts, search):
        assert r["decisions"] > 20  # two seats x 12 cards x 4 hands, forced cards not timed
        assert r["median_ms"] > 0 and r["worst_ms"] > 0
        assert len(r["per_deal"]) == 2
        assert all(float(2 * x).is_integer() for x in r["per_deal"])  # mean of two hands
        assert r["points_per_hand"] == pytest.approx(np.mean(r["per_deal"]))
        assert r["ci95"] == pytest.approx(list(mean_ci(np.asarray(r["per_deal"]))[1:]))
    diff = np.subtract(search["per_deal"], ismcts["per_deal"])
    assert first["difference"]["what"] == "search - ismcts"
    assert first["difference"]["mean"] == pytest.approx(diff.mean())

    again = _run(bench, tmp_path / "b.json", "--simulations", "4")
    for r1, r2 in zip(first["agents"], again["agents"], strict=True):
        assert r1["per_deal"] == r2["per_deal"] and r1["decisions"] == r2["decisions"]


def test_never_overwrites_the_output(bench: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "kept.json"
    out.write_text("earlier run\n")
    with pytest.raises(SystemExit) as e:
        bench.main([*TINY, "--out", str(out)])
    assert e.value.code == 2
    assert out.read_text() == "earlier run\n"


def test_calibration_probes_twice_on_the_same_positions(bench: ModuleType) -> None:
    import pyspiel

    import butifarra_env.integrations.openspiel  # noqa: F401 - registers the game
    from agents.evaluation.deal_sets import load_deal_set
    from agents.registry import make_agent

    game = pyspiel.load_game("python_butifarra")
    ppo = bench.agent_player(make_agent("ppo", 0))
    positions = bench.card_positions(game, load_deal_set("dev")[-1:], ppo)[:5]
    assert len(positions) == 5 and all(bench.is_card_choice(s) for s in positions)
    search = bench.agent_player(make_agent("search:samples=2,endgame=1,infer=0", 0))
    made: list[int] = []

    def make_ismcts(k: int) -> Any:
        made.append(k)
        return bench.IsmctsPlayer(game, ppo, k, 1, 72.0, 0)

    result = bench.calibrate(positions, search, make_ismcts)
    assert result["positions"] == 5 and len(result["probes"]) == 2
    assert made == [bench.PROBE_SIMULATIONS, result["probes"][1]["simulations"]]
    assert result["simulations"] >= bench.MIN_SIMULATIONS
