"""Agents that read ``butifarra_v1`` observations: a PPO model built for v1 saves, loads
and plays through the one table driver (arena, web table, play), which hands each agent its
own observation version; the boundary check refuses the wrong size."""

from __future__ import annotations

import numpy as np
import pytest

from tests.extras import need

need("torch")

import torch  # noqa: E402

from agents.base import check_batch  # noqa: E402
from agents.evaluation.arena import duel  # noqa: E402
from agents.ppo_agent import PPOAgent  # noqa: E402
from agents.ppo_net import ActorCritic, build_model, check_arch, model_payload  # noqa: E402
from agents.random_agent import RandomAgent  # noqa: E402
from agents.rule_based import RuleBasedAgent  # noqa: E402
from agents.table import Table  # noqa: E402
from butifarra_env.core import observation  # noqa: E402
from butifarra_env.core.game import Game  # noqa: E402
from butifarra_env.core.observation import OBS_SIZE, OBS_SIZE_V1, ObserverV1, encode  # noqa: E402
from butifarra_env.core.options import Options  # noqa: E402
from butifarra_env.core.rules import random_deal  # noqa: E402


def _v1_model() -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(hidden=32, layers=1, card_features=True, card_head=True, obs_version=1)


def test_v1_arch_round_trips_and_v0_arch_keeps_its_keys() -> None:
    v1 = _v1_model()
    assert v1.arch["obs_size"] == OBS_SIZE_V1 and v1.arch["obs_version"] == 1
    assert check_arch(v1.arch) == v1.arch
    assert build_model(v1.arch).state_dict()["obs_scale"].shape == (OBS_SIZE_V1,)
    v0 = ActorCritic(hidden=32, layers=1)
    assert "obs_version" not in v0.arch  # v0 checkpoints are what they always were
    with pytest.raises(ValueError, match="observation v1 needs 638"):
        check_arch({**v1.arch, "obs_size": OBS_SIZE})
    with pytest.raises(ValueError, match="obs_version must be one of"):
        check_arch({**v1.arch, "obs_version": 2})


def test_v1_agent_reads_the_history_and_refuses_v0_rows(tmp_path) -> None:
    path = tmp_path / "v1.pt"
    torch.save(model_payload(_v1_model(), {}), path)
    agent = PPOAgent(path)
    assert agent.obs_version == 1
    rng = np.random.default_rng(3)
    g = Game(Options(), 0, random_deal(rng, 0))
    while g.phase < 2 or len(g.tricks) < 2:  # into the play, two tricks done
        g.step(g.legal_actions()[0])
    mask = np.zeros(56, np.int8)
    mask[g.legal_actions()] = 1
    obs = encode(g, g.to_move, 1)
    probs = agent.action_probs_batch(obs[None], mask[None])[0]
    history = observation.LAYOUT_V1.field_slice("trick_won")
    changed = obs.copy()
    changed[history] = np.roll(obs[history], 12)  # another seat won the finished tricks
    assert not np.allclose(probs, agent.action_probs_batch(changed[None], mask[None])[0])
    with pytest.raises(ValueError, match=r"shape \(N, 638\) \(observation v1\)"):
        agent.act_batch(obs[None, :OBS_SIZE], mask[None])
    with pytest.raises(ValueError, match=r"shape \(N, 491\) \(observation v0\)"):
        check_batch(obs[None], mask[None])


class _Recorder(RandomAgent):
    """A random player that keeps every observation it was given."""

    def __init__(self, version: int) -> None:
        super().__init__(seed=0)
        self.obs_version = version
        self.seen: list[np.ndarray] = []

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        self.seen.extend(np.asarray(observations))
        return super().act_batch(observations, action_masks)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        self.seen.append(np.asarray(observation))
        return super().act(observation, action_mask)


def test_the_table_gives_each_agent_its_own_version() -> None:
    v0, v1 = _Recorder(0), _Recorder(1)
    duel(v1, v0, n_deals=8, seed=1)
    assert {len(o) for o in v1.seen} == {OBS_SIZE_V1}
    assert {len(o) for o in v0.seen} == {OBS_SIZE}
    assert any(o[observation.LAYOUT_V1.field_slice("trick_led")].any() for o in v1.seen)


def test_single_table_steps_match_the_reference_encoding() -> None:
    agents = [_Recorder(1), RuleBasedAgent()]
    t = Table([0, 1, 0, 1])
    rng = np.random.default_rng(5)
    t.start(Game(Options(obligada=True), 2, random_deal(rng, 0)), agents)
    assert isinstance(t.observer, ObserverV1)
    while not t.game.is_over:
        seat = t.game.to_move
        expected = encode(t.game, seat, 1 if seat % 2 == 0 else 0)
        before = len(agents[0].seen)
        t.agent_move(agents)
        if seat % 2 == 0 and len(agents[0].seen) > before:
            np.testing.assert_array_equal(agents[0].seen[-1], expected)
