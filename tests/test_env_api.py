"""The PettingZoo and Gymnasium contracts, options, seeding, rendering, pickling."""

from __future__ import annotations

import pickle
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, render_test, seed_test

import butifarra_env  # noqa: F401 - registers the Gymnasium id
from butifarra_env import butifarra_v0
from butifarra_env.gym_wrapper import SingleAgentEnv
from butifarra_env.observation import OBS_SIZE, STATE_SIZE, decode


@pytest.mark.parametrize("options", [{}, {"target_score": 51}, {"max_doubling_level": 0}])
def test_pettingzoo_api_test(options: dict) -> None:
    api_test(butifarra_v0.env(**options), num_cycles=500)


def test_pettingzoo_seed_test() -> None:
    seed_test(butifarra_v0.env, num_cycles=500)


def test_pettingzoo_render_test() -> None:
    render_test(butifarra_v0.env)


def test_pickle_round_trip_keeps_the_position() -> None:
    env = butifarra_v0.env()
    env.reset(seed=3)
    for _ in range(9):
        legal = np.flatnonzero(env.observe(env.agent_selection)["action_mask"])
        env.step(int(legal[0]))
    clone = pickle.loads(pickle.dumps(env))
    a = env.agent_selection
    assert clone.agent_selection == a
    np.testing.assert_array_equal(clone.observe(a)["observation"], env.observe(a)["observation"])
    assert clone.unwrapped.game.actions == env.unwrapped.game.actions


def test_same_seed_same_episode_different_seed_different_deal() -> None:
    def deal(seed: int) -> tuple:
        e = butifarra_v0.raw_env()
        e.reset(seed=seed)
        return e.game.dealer, e.game.initial_hands

    assert deal(1) == deal(1)
    assert deal(1) != deal(2)
    dealers = {deal(s)[0] for s in range(40)}
    assert dealers == {0, 1, 2, 3}  # the first dealer is drawn from the seed


def test_fixed_first_dealer_and_fixed_deal() -> None:
    e = butifarra_v0.raw_env(first_dealer=2)
    e.reset(seed=9)
    assert e.game.dealer == 2 and e.agent_selection == "player_2"
    hands = [list(range(12 * i, 12 * i + 12)) for i in range(4)]
    e.reset(options={"dealer": 1, "hands": hands})
    assert e.game.dealer == 1
    assert e.game.hands[3] == sum(1 << c for c in range(36, 48))
    with pytest.raises(ValueError, match="hands"):
        e.reset(options={"dealer": 1, "hands": hands[:3]})
    with pytest.raises(ValueError, match="exactly once"):
        e.reset(options={"dealer": 1, "hands": [hands[0]] * 4})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_score": 0}, "target_score"),
        ({"target_score": "101"}, "target_score"),
        ({"max_doubling_level": 5}, "max_doubling_level must be an int 0-4"),
        ({"butifarra_base": 3}, "butifarra_base must be an int 1-2"),
        ({"first_dealer": 4}, "first_dealer"),
        ({"render_mode": "rgb_array"}, "render_mode"),
        ({"reward_scale": -1}, "reward_scale"),
        ({"bogus": 1}, "unknown option"),
    ],
)
def test_bad_options_raise_value_error_naming_them(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        butifarra_v0.env(**kwargs)


def test_spaces_masks_and_state() -> None:
    env = butifarra_v0.env()
    env.reset(seed=0)
    space = env.observation_space("player_0")
    assert space["observation"].shape == (OBS_SIZE,) and space["action_mask"].shape == (56,)
    assert env.action_space("player_3").n == 56
    acting = env.agent_selection
    for a in env.agents:
        obs = env.observe(a)
        assert space.contains(obs)
        assert obs["action_mask"].any() == (a == acting)  # only the mover has legal actions
    state = env.state()
    assert state.shape == (STATE_SIZE,) and env.unwrapped.state_space.contains(state)
    assert state[:192].sum() == 48  # all four hands are in the state


def test_raw_env_raises_on_illegal_action_wrapped_env_terminates() -> None:
    raw = butifarra_v0.raw_env()
    raw.reset(seed=0)
    with pytest.raises(ValueError, match=r"illegal action 0 \(play 1o\).*choose_trump.*legal"):
        raw.step(0)
    env = butifarra_v0.env()
    env.reset(seed=0)
    mover = env.agent_selection
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env.step(0)
    assert all(env.terminations.values())
    assert env.rewards[mover] == -36 * 2 * 16  # the worst possible hand loss
    assert env.rewards[mover] < 0


def test_reward_scale_scales_rewards() -> None:
    def final_rewards(scale: float) -> dict:
        e = butifarra_v0.raw_env(reward_scale=scale)
        e.reset(seed=4)
        while not all(e.terminations.values()):
            e.step(e.legal_actions()[-1])
        return e.rewards

    raw, scaled = final_rewards(1.0), final_rewards(0.01)
    assert any(v != 0 for v in raw.values())
    for a in raw:
        assert scaled[a] == pytest.approx(raw[a] * 0.01)


def test_ansi_render_shows_hand_trump_multiplier_and_counts() -> None:
    e = butifarra_v0.raw_env(render_mode="ansi")
    e.reset(seed=2)
    e.step(50)  # dealer chooses espadas
    text = e.render()
    assert "Trump: espadas" in text and "Multiplier: x1" in text
    assert "Tricks:" in text and "Points:" in text
    for suit in ("oros", "copas", "espadas", "bastos"):
        assert suit in text


def test_decode_names_every_field() -> None:
    e = butifarra_v0.raw_env()
    e.reset(seed=1)
    d = decode(e.observe(e.agent_selection)["observation"])
    assert len(d["hand"]) == 12 and d["phase"] == "choose_trump" and d["trump"] is None
    assert d["dealer"] == 0  # the dealer chooses first and sees itself at relative seat 0
    with pytest.raises(ValueError, match="shape"):
        decode(np.zeros(3))


# ------------------------------------------------------------------ Gymnasium wrapper
def test_gymnasium_check_env_passes() -> None:
    check_env(SingleAgentEnv(seat=1), skip_render_check=True)
    check_env(gymnasium.make("butifarra_env/Butifarra-v0", seat=2).unwrapped)


def test_gymnasium_wrapper_plays_full_episodes_with_masks() -> None:
    env = SingleAgentEnv(seat=3, target_score=None)
    rng = np.random.default_rng(0)
    total = 0.0
    for ep in range(20):
        obs, _ = env.reset(seed=ep)
        done = False
        while not done:
            mask = env.action_masks()
            assert mask.dtype == bool and (mask == obs["action_mask"].astype(bool)).all()
            assert env.game.to_move == 3
            obs, reward, done, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
            assert not trunc
        total += reward
        assert reward == info["hand_result"]["rewards"][3]
    assert total != 0


def test_gymnasium_wrapper_opponent_policies_and_illegal_actions() -> None:
    calls = []

    def first_legal(obs: np.ndarray, mask: np.ndarray) -> int:
        calls.append(obs.shape)
        return int(np.flatnonzero(mask)[0])

    env = SingleAgentEnv(seat=0, opponents=first_legal)
    obs, _ = env.reset(seed=1)
    illegal = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    _, reward, terminated, _, info = env.step(illegal)
    assert terminated and reward < 0 and info["illegal_action"] == illegal
    strict = SingleAgentEnv(seat=0, illegal_action="raise")
    obs, _ = strict.reset(seed=1)
    with pytest.raises(ValueError, match="illegal action"):
        strict.step(int(np.flatnonzero(obs["action_mask"] == 0)[0]))
    env.reset(seed=2)
    while True:
        _, _, done, _, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        if done:
            break
    assert calls and all(shape == (OBS_SIZE,) for shape in calls)
    with pytest.raises(ValueError, match="three"):
        SingleAgentEnv(opponents=[first_legal, first_legal])
