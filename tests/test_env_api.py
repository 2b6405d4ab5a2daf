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
from butifarra_env.core.cards import ALL_CARDS
from butifarra_env.core.observation import (
    FIELD_MAX,
    FIELDS,
    OBS_SIZE,
    STATE_SIZE,
    decode,
    field,
    field_slice,
    pack_bits,
    pack_bits_batch,
    read_view,
    scale_vector,
)
from butifarra_env.envs.gym_env import SingleAgentEnv


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
        ({"render_mode": "rgb"}, "render_mode"),
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


def _suit_per_seat_position() -> butifarra_v0.raw_env:
    """Seat s holds the whole suit s; seat 0 deals in a match at 30-12, hand 4. Seat 0 sings
    espadas, seat 3 contra, then three cards: 2 of copas (seat 1, the mano), 3 of espadas
    (seat 2 must trump), as de bastos (seat 3 cannot follow or beat). Seat 0 to move."""
    e = butifarra_v0.raw_env(target_score=101)
    hands = [list(range(12 * s, 12 * s + 12)) for s in range(4)]
    e.reset(options={"dealer": 0, "hands": hands, "hand_number": 3, "match_scores": [30, 12]})
    for action in (50, 55, 54, 55, 55, 13, 26, 36):
        e.step(action)
    return e


def test_decode_names_every_field_from_each_seat() -> None:
    e = _suit_per_seat_position()
    assert e.agent_selection == "player_0"
    d0 = decode(e.observe("player_0")["observation"])
    assert set(d0) - {"butifarra"} == {name for name, _, _ in FIELDS}
    assert d0 == {
        "hand": list(range(12)),
        "played": [[], [13], [26], [36]],
        "trick": [None, 13, 26, 36],
        "trick_leader": 1,
        "voids": [[], [], [1], [1]],
        "trump": 2,
        "butifarra": False,
        "chooser": 0,
        "delegated": False,
        "dealer": 0,
        "doubling_level": 1,
        "doubling_turn": None,
        "phase": "play",
        "team_tricks": [0, 0],
        "team_points": [0, 0],
        "hand_number": 3,
        "match_scores": [30, 12],
        "target_score": 101,
        "max_doubling_level": 4,
        "butifarra_base": 2,
    }
    d1 = decode(e.observe("player_1")["observation"])  # everything relative to seat 1
    assert d1["hand"] == [12, *range(14, 24)]
    assert d1["played"] == [[13], [26], [36], []] and d1["trick"] == [13, 26, 36, None]
    assert d1["voids"] == [[], [1], [1], []]
    assert (d1["trick_leader"], d1["chooser"], d1["dealer"]) == (0, 3, 3)
    assert d1["match_scores"] == [12, 30]
    with pytest.raises(ValueError, match="shape"):
        decode(np.zeros(3))


def test_named_views_agree_with_decode() -> None:
    e = _suit_per_seat_position()
    obs = e.observe("player_0")["observation"]
    view = read_view(obs)
    assert view.hand == sum(1 << c for c in range(12))
    assert view.trick == [-1, 13, 26, 36] and view.n_trick == 3 and view.leader == 1
    assert view.voids == [0, 0, 0b10, 0b10] and view.trump == 2 and view.level == 1
    assert view.sizes == [12, 11, 11, 11] and view.chooser == 0 and view.dealer == 0
    assert view.unseen == ALL_CARDS & ~sum(1 << c for c in (*range(12), 13, 26, 36))
    assert field(obs, "match_scores").tolist() == [30, 12]
    batch = np.stack([obs, obs])
    assert field(batch, "hand").shape == (2, 48)
    assert pack_bits_batch(batch) == [pack_bits(obs)] * 2
    with pytest.raises(ValueError, match="unknown observation field 'nope'"):
        field_slice("nope")


def test_scale_vector_maps_every_reachable_value_into_unit_interval() -> None:
    scale = scale_vector()
    top = np.full(OBS_SIZE, 255, dtype=np.float32)  # larger than any field can hold
    for name, _, _ in FIELDS:
        top[field_slice(name)] = FIELD_MAX[name]
    assert np.allclose(top * scale, 1.0)
    assert FIELD_MAX["team_points"] == 72 and FIELD_MAX["team_tricks"] == 12


# ------------------------------------------------------------------ Gymnasium wrapper
def test_gymnasium_check_env_passes() -> None:
    check_env(SingleAgentEnv(seat=1), skip_render_check=True)
    check_env(gymnasium.make("butifarra_env/Butifarra-v0", seat=2).unwrapped)


def test_gymnasium_wrapper_plays_full_episodes_with_masks() -> None:
    env = SingleAgentEnv(seat=3, target_score=None)
    rng = np.random.default_rng(0)
    ended_by_opponent = 0
    for ep in range(20):
        obs, _ = env.reset(seed=ep)
        done = False
        while not done:
            mask = env.action_masks()
            assert mask.dtype == bool and (mask == obs["action_mask"].astype(bool)).all()
            assert env.game.to_move == 3
            obs, reward, done, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
            assert not trunc
            assert done or reward == 0.0  # scores arrive only at the hand's end
        leader, _, _ = env.game.tricks[-1]
        ended_by_opponent += (leader + 3) % 4 != 3  # the last card was not the learner's
        # The learner's reward is its team's score difference, also when an opponent's card
        # ended the hand after the learner's last decision.
        scores = info["hand_result"]["scores"]
        assert reward == scores[1] - scores[0]
        assert not obs["action_mask"].any()
    assert ended_by_opponent > 0


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
