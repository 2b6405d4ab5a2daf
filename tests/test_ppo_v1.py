"""Training on ``butifarra_v1`` observations (``--obs-version 1``): both engines fill the
learner's buffers with v1 rows, fixed agents still read v0, and the checkpoint plays as a v1
agent; a bad version is refused before any work."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.extras import need

need("torch")

from agents import make_agent  # noqa: E402
from agents.evaluation.arena import duel  # noqa: E402
from butifarra_env.core.observation import OBS_SIZE_V1  # noqa: E402
from tests.test_ppo import tiny_config  # noqa: E402
from train.ppo import Config, train  # noqa: E402


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_a_v1_run_trains_and_plays_as_a_v1_agent(tmp_path: Path, engine: str) -> None:
    cfg = tiny_config(tmp_path, obs_version=1, engine=engine, device="cpu", opp_rule=0.5)
    train(cfg)
    agent = make_agent(f"ppo:{tmp_path / 't' / 'checkpoint.pt'}")
    assert agent.obs_version == 1
    assert agent.model.arch["obs_size"] == OBS_SIZE_V1
    result = duel(agent, make_agent("rule"), n_deals=4, seed=0)
    assert result.n_deals == 4 and len(result.pair_means) == 4


@pytest.mark.parametrize("bad", [2, -1, True, 1.0])
def test_a_bad_obs_version_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match=r"obs_version must be one of \[0, 1\]"):
        replace(Config(), obs_version=bad).validate()
