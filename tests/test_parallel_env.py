"""The Parallel view (``butifarra_v0.parallel_env``): PettingZoo's own tests, move-for-move
equality with the AEC env, the no-op of the waiting agents, illegal actions and bad input."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from pettingzoo.test import max_cycles_test, parallel_api_test, state_test
from pettingzoo.utils.conversions import parallel_to_aec

from butifarra_env import butifarra_v0
from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.envs.parallel import N_PARALLEL_ACTIONS, NOOP_ACTION

NOOP_ONLY = np.eye(N_PARALLEL_ACTIONS, dtype=np.int8)[NOOP_ACTION]


def test_pettingzoo_parallel_api_test() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its unknown reset option {"options": 1}
        parallel_api_test(butifarra_v0.parallel_env(), num_cycles=1000)


def test_pettingzoo_max_cycles_test_on_the_view_and_its_aec_conversion() -> None:
    # max_cycles_test wants a module with env() and parallel_env() taking max_cycles; the
    # turn-based AEC env has no cycles of equal turns, so its env() is the view's AEC form.
    mod = SimpleNamespace(
        parallel_env=butifarra_v0.parallel_env,
        env=lambda **kw: parallel_to_aec(butifarra_v0.parallel_env(**kw)),
    )
    max_cycles_test(mod)


def test_pettingzoo_state_test() -> None:
    state_test(butifarra_v0.env(), butifarra_v0.parallel_env())


@pytest.mark.parametrize("options", [{}, {"target_score": 41}], ids=["hand", "match"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_view_equals_the_aec_env_move_for_move(options: dict, seed: int) -> None:
    par = butifarra_v0.parallel_env(**options)
    aec = butifarra_v0.raw_env(**options)
    obs, infos = par.reset(seed=seed)
    aec.reset(seed=seed)
    rng = np.random.default_rng(seed)
    moves = 0
    while True:
        mover = aec.agent_selection
        for agent in par.possible_agents:
            ref = aec.observe(agent)
            np.testing.assert_array_equal(obs[agent]["observation"], ref["observation"])
            if agent == mover:
                np.testing.assert_array_equal(
                    obs[agent]["action_mask"][:N_ACTIONS], ref["action_mask"]
                )
                assert obs[agent]["action_mask"][NOOP_ACTION] == 0
            else:
                np.testing.assert_array_equal(obs[agent]["action_mask"], NOOP_ONLY)
            np.testing.assert_array_equal(infos[agent]["action_mask"], obs[agent]["action_mask"])
        np.testing.assert_array_equal(par.state(), aec.state())
        action = int(rng.choice(np.flatnonzero(obs[mover]["action_mask"])))
        actions = {a: (action if a == mover else NOOP_ACTION) for a in par.agents}
        obs, rewards, terms, truncs, infos = par.step(actions)
        aec.step(action)
        moves += 1
        assert rewards == {a: float(aec.rewards[a]) for a in aec.possible_agents}
        assert not any(truncs.values())
        if any(terms.values()):
            assert all(terms.values()) and all(aec.terminations.values()) and par.agents == []
            break
        assert not any(aec.terminations.values())
    assert moves >= 48 + 1  # at least the 48 cards and a trump choice


def test_sampling_the_action_space_without_a_mask_plays_legal_moves() -> None:
    par = butifarra_v0.parallel_env()
    par.reset(seed=3)
    for _ in range(300):
        actions = {a: int(par.action_space(a).sample()) for a in par.agents}
        _, rewards, terms, _, infos = par.step(actions)
        assert not any("illegal_action" in i for i in infos.values())
        if any(terms.values()):
            break
    assert par.agents == [] and sum(rewards.values()) == 0  # a whole hand, zero-sum


def test_an_illegal_action_ends_the_episode_with_the_penalty_of_env() -> None:
    penalty = -butifarra_v0.raw_env().game_options.worst_hand_loss
    par = butifarra_v0.parallel_env()
    obs, _ = par.reset(seed=0)
    mover = next(a for a in par.agents if obs[a]["action_mask"][:N_ACTIONS].any())
    waiting = next(a for a in par.agents if a != mover)
    legal = int(np.flatnonzero(obs[mover]["action_mask"])[0])
    _, rewards, terms, _, infos = par.step({mover: legal, waiting: 3})  # waiting: not the no-op
    assert (
        all(terms.values())
        and rewards[waiting] == penalty
        and infos[waiting]["illegal_action"] == 3
    )
    assert rewards[mover] == 0.0 and "illegal_action" not in infos[mover]
    obs, _ = par.reset(seed=0)
    _, rewards, terms, _, infos = par.step({mover: NOOP_ACTION})  # the mover cannot pass its turn
    assert all(terms.values()) and rewards[mover] == penalty
    with pytest.raises(RuntimeError, match="call reset"):
        par.step({mover: legal})


@pytest.mark.parametrize(
    ("actions", "says"),
    [
        ([1, 2], "actions must be a dict"),
        ({"player_9": 1}, "unknown agent"),
        ({}, "is to move: actions must include its action"),
        ({"MOVER": 57}, "must be an int 0-56"),
        ({"MOVER": 1.0}, "must be an int 0-56"),
    ],
)
def test_bad_actions_are_refused_and_change_nothing(actions, says: str) -> None:
    par = butifarra_v0.parallel_env()
    obs, _ = par.reset(seed=0)
    mover = next(a for a in par.agents if obs[a]["action_mask"][:N_ACTIONS].any())
    if isinstance(actions, dict):
        actions = {(mover if k == "MOVER" else k): v for k, v in actions.items()}
    before = list(par.game.actions)
    with pytest.raises(ValueError, match=says):
        par.step(actions)
    assert par.game.actions == before and par.agents == par.possible_agents


def test_supersuit_vectorises_the_view() -> None:
    ss = pytest.importorskip("supersuit", reason="SuperSuit comes with the 'integrations' extra")
    vec = ss.pettingzoo_env_to_vec_env_v1(butifarra_v0.parallel_env())
    obs, _ = vec.reset(seed=0)
    assert obs["observation"].shape == (4, 491) and obs["action_mask"].shape == (4, 57)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(120):
        masks = obs["action_mask"]
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])  # never empty
        obs, rewards, terms, truncs, infos = vec.step(actions)
        ended += int(terms.all())
    assert ended >= 1
