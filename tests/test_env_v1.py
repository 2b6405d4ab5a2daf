"""``butifarra_v1``: the v0 env with the trick history and the variants in the observation.

PettingZoo's and Gymnasium's own checks; the fast observer held to the reference encoder
along random games under each variant; the 491-value prefix held to ``butifarra_v0`` move for
move; the float32 scale; the decoded history against the game; and the same vector from the
Gymnasium single and vector envs and the OpenSpiel game.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test

import butifarra_env
from butifarra_env import butifarra_v0, butifarra_v1
from butifarra_env.core.cards import cards_of
from butifarra_env.core.observation import (
    OBS_SIZE,
    OBS_SIZE_V1,
    decode,
    encode,
    field,
    layout,
)
from butifarra_env.envs.gym_env import SingleAgentEnv
from butifarra_env.envs.gym_vector import ButifarraVectorEnv
from tests.extras import need

LAYOUT = layout(1)
VARIANTS: dict[str, tuple[dict[str, Any], tuple[int, ...]]] = {
    "default": ({}, (0, 0, 4)),
    "obligada": ({"obligada": True}, (1, 0, 4)),
    "linear": ({"linear_doubling": True}, (0, 1, 4)),
    "cap2": ({"butifarra_max_doubling_level": 2}, (0, 0, 2)),
    "max3": ({"max_doubling_level": 3, "target_score": 31}, (0, 0, 3)),
}
"""Options -> the v1 fields (obligada, linear_doubling, butifarra_max_doubling_level) they
give: the effective top level in a butifarra follows max_doubling_level when no cap is set."""
_WEIGHTS = (np.arange(OBS_SIZE, dtype=np.int64) * 7919 + 13) % 104729


def _pick(obs: np.ndarray, mask: np.ndarray) -> int:
    """A deterministic v0 opponent that varies with the position (a hash of the 491 values
    picks a legal action; any other length fails the product)."""
    legal = np.flatnonzero(mask)
    return int(legal[int(obs.astype(np.int64) @ _WEIGHTS) % len(legal)])


def _pick_batch(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    return np.array([_pick(o, m) for o, m in zip(obs, masks, strict=True)], dtype=np.int64)


def _play(env: Any, seed: int, on_move: Any) -> None:
    """Random legal play of ``env`` (a bare AEC env) from ``reset(seed)`` to the end, calling
    ``on_move(env)`` before every move and once at the end."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while not all(env.terminations.values()):
        on_move(env)
        legal = cards_of(env.game.legal)
        env.step(legal[int(rng.integers(len(legal)))])
    on_move(env)


def _vector_space(space: gymnasium.Space) -> gymnasium.Space:
    """The ``observation`` entry of an env's Dict observation space."""
    assert isinstance(space, gymnasium.spaces.Dict)
    return space["observation"]


def _variant_fields(obs: np.ndarray) -> tuple[int, ...]:
    names = ("obligada", "linear_doubling", "butifarra_max_doubling_level")
    return tuple(int(field(obs, name)[0]) for name in names)


# --------------------------------------------------------------------------- frameworks
def test_pettingzoo_api_tests_and_names() -> None:
    api_test(butifarra_v1.env(), num_cycles=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its unknown reset option {"options": 1}
        parallel_api_test(butifarra_v1.parallel_env(), num_cycles=300)
    assert butifarra_v1.env().metadata["name"] == butifarra_v1.raw_env.metadata["name"]
    assert butifarra_v1.parallel_env().metadata["name"] == "butifarra_v1_parallel"
    assert butifarra_v0.env().metadata["name"] == "butifarra_v0"  # v0 unchanged
    assert isinstance(butifarra_v1.env().unwrapped, butifarra_v1.raw_env)


def test_gymnasium_check_env_and_the_registered_v1_ids() -> None:
    check_env(SingleAgentEnv(seat=1, obs_version=1), skip_render_check=True)
    env = gymnasium.make(butifarra_env.GYM_ID_V1, seat=2).unwrapped
    check_env(env)
    assert _vector_space(env.observation_space).shape == (OBS_SIZE_V1,)
    vec = gymnasium.make_vec(butifarra_env.GYM_ID_V1, num_envs=3)
    obs, _ = vec.reset(seed=0)
    assert obs["observation"].shape == (3, OBS_SIZE_V1)
    assert _vector_space(gymnasium.make(butifarra_env.GYM_ID).observation_space).shape == (
        OBS_SIZE,
    )


# --------------------------------------------------------------------------- the vector
@pytest.mark.parametrize("name", list(VARIANTS))
def test_observations_are_the_reference_encoding_under_each_variant(name: str) -> None:
    options, expected = VARIANTS[name]
    env = butifarra_v1.raw_env(**options)
    hands: set[int] = set()

    def check(env: Any) -> None:
        hands.add(env.game.hand_number)
        for agent, seat in env.agent_name_mapping.items():
            obs = env.observe(agent)["observation"]
            np.testing.assert_array_equal(obs, encode(env.game, seat, 1))
            assert _variant_fields(obs) == expected

    for seed in range(2):
        _play(env, seed, check)
    if "target_score" in options:
        assert len(hands) > 1  # the history starts afresh at each hand of a match


def test_the_v0_prefix_and_the_state_are_v0s_move_for_move() -> None:
    v0, v1 = butifarra_v0.raw_env(obligada=True), butifarra_v1.raw_env(obligada=True)
    for seed in (3, 4):
        v1.reset(seed=seed)

        def check(v0: Any) -> None:
            for agent in v0.possible_agents:
                old, new = v0.observe(agent), v1.observe(agent)
                np.testing.assert_array_equal(new["observation"][:OBS_SIZE], old["observation"])
                np.testing.assert_array_equal(new["action_mask"], old["action_mask"])
            np.testing.assert_array_equal(v1.state(), v0.state())
            assert v1.rewards == v0.rewards

        def step_both(v0: Any) -> None:
            if len(v1.game.actions) < len(v0.game.actions):  # v0 has moved: v1 follows
                v1.step(v0.game.actions[-1][1])
            check(v0)

        _play(v0, seed, step_both)
        assert v1.terminations == v0.terminations and v1.game.tricks == v0.game.tricks


def test_float32_is_the_uint8_vector_times_the_v1_scale() -> None:
    raw = butifarra_v1.raw_env()
    flt = butifarra_v1.raw_env(obs_format="float32")
    assert _vector_space(flt.observation_space("player_0")) == gymnasium.spaces.Box(
        0, 1, (OBS_SIZE_V1,), np.float32
    )
    scale = LAYOUT.scale_vector()
    flt.reset(seed=5)

    def check(raw: Any) -> None:
        if raw.game.actions:
            flt.step(raw.game.actions[-1][1])
        for agent in raw.possible_agents:
            got = flt.observe(agent)["observation"]
            assert got.dtype == np.float32 and got.min() >= 0 and got.max() <= 1
            np.testing.assert_array_equal(got, raw.observe(agent)["observation"] * scale)

    _play(raw, 5, check)
    assert field(flt.observe("player_0")["observation"], "card_trick").max() == 1.0


def test_the_decoded_history_is_the_games_tricks() -> None:
    env = butifarra_v1.raw_env()

    def check(env: Any) -> None:
        game = env.game
        for agent, seat in env.agent_name_mapping.items():
            obs = env.observe(agent)["observation"]
            want = [
                {
                    "leader": (leader - seat) % 4,
                    "winner": (winner - seat) % 4,
                    "cards": [cards[(seat + r) % 4] for r in range(4)],
                }
                for leader, cards, winner in game.tricks
            ]
            assert decode(obs)["tricks"] == want
            on_table = [c for c in game.trick_cards if c >= 0]
            assert (field(obs, "card_trick")[on_table] == len(game.tricks) + 1).all()

    _play(env, 6, check)
    assert len(env.game.tricks) == 12


# --------------------------------------------------------------------------- other envs
def test_single_and_vector_envs_give_the_same_v1_rows_opponents_read_v0() -> None:
    n, seat, dealer = 3, 1, 2
    opts: dict[str, Any] = {"first_dealer": dealer, "linear_doubling": True}
    rng = np.random.default_rng(8)
    deals = np.stack([rng.permutation(48).reshape(4, 12) for _ in range(n)])
    seen: list[int] = []

    def opponent(obs: np.ndarray, mask: np.ndarray) -> int:
        seen.append(obs.shape[-1])
        return _pick(obs, mask)

    vec = ButifarraVectorEnv(n, seat, _pick_batch, obs_version=1, **opts)
    singles = [SingleAgentEnv(seat, opponent, obs_version=1, **opts) for _ in range(n)]
    obs, _ = vec.reset(seed=0, options={"dealers": np.full(n, dealer), "hands": deals})
    expected = [
        s.reset(options={"dealer": dealer, "hands": deals[i].tolist()})[0]
        for i, s in enumerate(singles)
    ]
    done = np.zeros(n, dtype=bool)
    while not done.all():
        for i in np.flatnonzero(~done):
            np.testing.assert_array_equal(obs["observation"][i], expected[i]["observation"])
            np.testing.assert_array_equal(obs["action_mask"][i], expected[i]["action_mask"])
        actions = _pick_batch(obs["observation"][:, :OBS_SIZE], obs["action_mask"])
        obs, _, terminated, _, _ = vec.step(actions)
        for i in np.flatnonzero(~done):
            expected[i], _, ended, _, _ = singles[i].step(int(actions[i]))
            assert ended == terminated[i]
        for i in np.flatnonzero(~done & terminated):  # NEXT_STEP: the terminal observation
            np.testing.assert_array_equal(obs["observation"][i], expected[i]["observation"])
        done |= terminated
    assert obs["observation"].shape == (n, OBS_SIZE_V1) and set(seen) == {OBS_SIZE}


def test_openspiel_v1_tensor_is_the_envs_v1_observation() -> None:
    pyspiel = need("pyspiel")
    from butifarra_env.integrations import openspiel  # noqa: F401 - registers the game

    variants: dict[str, Any] = {"butifarra_max_doubling_level": 1, "obligada": True}
    game = pyspiel.load_game("python_butifarra", {**variants, "obs_version": 1})
    v0_game = pyspiel.load_game("python_butifarra", variants)
    state, old = game.new_initial_state(), v0_game.new_initial_state()
    rng = np.random.default_rng(9)
    while state.is_chance_node():
        outcomes = state.chance_outcomes()
        action = outcomes[int(rng.integers(len(outcomes)))][0]
        state.apply_action(action)
        old.apply_action(action)
    dealing = np.asarray(game.new_initial_state().observation_tensor(0), np.uint8)
    assert dealing.shape == (OBS_SIZE_V1,) and _variant_fields(dealing) == (1, 0, 1)
    g = state.game_state
    env = butifarra_v1.raw_env(**variants)
    env.reset(options={"dealer": g.dealer, "hands": [cards_of(h) for h in g.initial_hands]})
    while True:
        for p in range(4):
            tensor = np.asarray(state.observation_tensor(p), np.float32)
            obs = env.observe(env.possible_agents[p])["observation"]
            np.testing.assert_array_equal(tensor, obs)
            np.testing.assert_array_equal(np.asarray(old.observation_tensor(p)), obs[:OBS_SIZE])
        if state.is_terminal():
            break
        legal = state.legal_actions()
        action = legal[int(rng.integers(len(legal)))]
        twin = state.clone()  # MCTS clones: the copy's observer is a v1 one too
        for s in (state, old, twin):
            s.apply_action(action)
        env.step(action)
        np.testing.assert_array_equal(twin.observation_tensor(0), state.observation_tensor(0))
    assert len(decode(obs)["tricks"]) == 12


@pytest.mark.parametrize("bad", [2, -1, "1", True, None])
def test_bad_versions_are_refused_naming_the_allowed_ones(bad: Any) -> None:
    allowed = rf"obs_version must be one of \[0, 1\], got {bad!r}"
    with pytest.raises(ValueError, match=allowed):
        butifarra_v0.env(obs_version=bad)
    with pytest.raises(ValueError, match=allowed):
        butifarra_v1.parallel_env(obs_version=bad)
    with pytest.raises(ValueError, match=allowed):
        SingleAgentEnv(obs_version=bad)
    with pytest.raises(ValueError, match=allowed):
        ButifarraVectorEnv(2, obs_version=bad)


def test_butifarra_v1_refuses_another_version() -> None:
    with pytest.raises(ValueError, match="butifarra_v1 observations are version 1, got obs_v"):
        butifarra_v1.env(obs_version=0)
    assert butifarra_v1.raw_env(obs_version=1).obs_version == 1


def test_openspiel_refuses_a_bad_version() -> None:
    pyspiel = need("pyspiel")
    from butifarra_env.integrations import openspiel  # noqa: F401 - registers the game

    with pytest.raises(ValueError, match=r"obs_version must be one of \[0, 1\], got 2"):
        pyspiel.load_game("python_butifarra", {"obs_version": 2})


def test_making_v0_does_not_call_it_out_of_date() -> None:
    """Gymnasium warns that an id is out of date when a higher version is registered; v0 is
    a sibling of v1, not a deprecated env, so the notice is silenced (the notebooks show it
    otherwise)."""
    import warnings

    import gymnasium

    import butifarra_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every other warning would be recorded
        butifarra_env.register_gymnasium_id()  # installs the filter in this context
        gymnasium.make(butifarra_env.GYM_ID).close()
        gymnasium.make_vec(butifarra_env.GYM_ID, num_envs=2).close()
    assert not [w for w in caught if "out of date" in str(w.message)]
