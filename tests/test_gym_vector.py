"""The Gymnasium vector env on the batched engine, against Gymnasium's conventions and against
N independent ``SingleAgentEnv`` playing the same deals with the same opponents."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

import butifarra_env  # noqa: F401 - registers the Gymnasium id
from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.cards import cards_of
from butifarra_env.core.observation import OBS_SIZE, field
from butifarra_env.core.rules import PHASE_HAND_OVER, random_deal
from butifarra_env.envs.gym_env import SingleAgentEnv
from butifarra_env.envs.gym_vector import RESET_STEP_ACTION, ButifarraVectorEnv

GYM_ID = "butifarra_env/Butifarra-v0"
_WEIGHTS = (np.arange(OBS_SIZE, dtype=np.int64) * 7919 + 13) % 104729


def _pick(obs: np.ndarray, mask: np.ndarray) -> int:
    """A deterministic opponent that varies with the position: a hash of the observation
    chooses among the legal actions."""
    legal = np.flatnonzero(mask)
    return int(legal[int(obs.astype(np.int64) @ _WEIGHTS) % len(legal)])


def _pick_batch(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    return np.array([_pick(o, m) for o, m in zip(obs, masks, strict=True)], dtype=np.int64)


def _random_legal(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """A random legal action per row; 0 for rows without one (terminal: ignored)."""
    return np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in masks])


# ------------------------------------------------------------------ Gymnasium's expectations
def test_make_vec_builds_the_batched_vector_env_with_batched_spaces() -> None:
    envs = gymnasium.make_vec(
        GYM_ID, num_envs=5, vectorization_mode="vector_entry_point", seat=2, opponents=None
    )
    assert isinstance(envs, VectorEnv) and isinstance(envs.unwrapped, ButifarraVectorEnv)
    assert envs.num_envs == 5
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    single = SingleAgentEnv(seat=2)
    assert envs.single_observation_space == single.observation_space
    assert envs.single_action_space == single.action_space
    assert envs.observation_space == batch_space(single.observation_space, 5)
    assert envs.action_space == batch_space(single.action_space, 5)
    obs, info = envs.reset(seed=1)
    assert envs.observation_space.contains(obs)
    assert obs["observation"].dtype == np.uint8 and obs["observation"].shape == (5, OBS_SIZE)
    assert obs["action_mask"].dtype == np.int8 and obs["action_mask"].shape == (5, N_ACTIONS)
    assert info["action_mask"].shape == (5, N_ACTIONS) and info["_action_mask"].all()
    masks = envs.unwrapped.action_masks()
    assert masks.dtype == bool and (masks == obs["action_mask"].astype(bool)).all()
    assert masks.any(axis=1).all()  # the learner is to move in every hand
    actions = _random_legal(np.random.default_rng(0), masks)
    obs, rewards, terminated, truncated, info = envs.step(actions)
    assert envs.observation_space.contains(obs)
    assert rewards.shape == (5,) and rewards.dtype == np.float64
    assert terminated.dtype == bool and truncated.dtype == bool and not truncated.any()
    # Without a mode, make_vec prefers the registered vector entry point.
    assert isinstance(gymnasium.make_vec(GYM_ID, num_envs=2).unwrapped, ButifarraVectorEnv)
    sync = gymnasium.make_vec(GYM_ID, num_envs=2, vectorization_mode="sync", seat=2)
    assert sync.single_observation_space == envs.single_observation_space


def _trajectory(envs: ButifarraVectorEnv, seed: int, steps: int) -> list[Any]:
    out: list[Any] = []
    obs, _ = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out.append(obs["observation"].copy())
    for _ in range(steps):
        obs, rewards, terminated, _, _ = envs.step(_random_legal(rng, obs["action_mask"]))
        out += [obs["observation"].copy(), rewards.copy(), terminated.copy()]
    return out


def test_same_seed_same_trajectory_other_seed_other_deals() -> None:
    a = _trajectory(ButifarraVectorEnv(8, seat=1), seed=3, steps=30)
    b = _trajectory(ButifarraVectorEnv(8, seat=1), seed=3, steps=30)
    c = _trajectory(ButifarraVectorEnv(8, seat=1), seed=4, steps=30)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert np.stack(a[3::3]).sum() > 8  # episodes ended (and restarted) along the way


def test_next_step_autoreset_shows_the_terminal_obs_then_ignores_the_action() -> None:
    envs = ButifarraVectorEnv(6, seat=0)
    obs, _ = envs.reset(seed=11)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        obs, rewards, terminated, _, info = envs.step(_random_legal(rng, obs["action_mask"]))
        if not terminated.any():
            continue
        ended = np.flatnonzero(terminated)
        vec = obs["observation"][ended]
        # The terminal row offers one action, the ignored RESET_STEP_ACTION, so that a
        # masked sampler has a legal action in every row.
        only_reset = np.zeros(N_ACTIONS, np.int8)
        only_reset[RESET_STEP_ACTION] = 1
        assert (obs["action_mask"][ended] == only_reset).all()
        assert (info["action_mask"][ended] == only_reset).all()
        assert (envs.action_masks()[ended] == only_reset.astype(bool)).all()
        assert (field(vec, "phase")[:, PHASE_HAND_OVER] == 1).all()
        assert not field(vec, "hand").any()  # every card has been played
        assert (field(vec, "team_tricks").sum(axis=1) == 12).all()
        # The next action of an ended sub-env is ignored, even an illegal one.
        actions = _random_legal(rng, obs["action_mask"])
        actions[ended] = 0
        obs, rewards, terminated, _, info = envs.step(actions)
        assert (rewards[ended] == 0).all() and not terminated[ended].any()
        assert obs["action_mask"][ended].any(axis=1).all()
        assert (field(obs["observation"][ended], "hand").sum(axis=1) == 12).all()
        checked += len(ended)
    assert checked > 6


def test_same_step_autoreset_puts_the_terminal_obs_in_final_obs() -> None:
    envs = ButifarraVectorEnv(6, seat=3, autoreset_mode=AutoresetMode.SAME_STEP)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, _ = envs.reset(seed=2)
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(60):
        obs, rewards, terminated, _, info = envs.step(_random_legal(rng, obs["action_mask"]))
        assert obs["action_mask"].any(axis=1).all()  # always a decision to take
        if not terminated.any():
            assert "final_obs" not in info
            continue
        assert (info["_final_obs"] == terminated).all() and (
            info["_final_info"] == terminated
        ).all()
        for i in np.flatnonzero(terminated):
            final = info["final_obs"][i]
            assert field(final["observation"], "phase")[PHASE_HAND_OVER] == 1
            assert not final["action_mask"].any()
            assert field(obs["observation"][i], "hand").sum() == 12  # the new hand
            checked += 1
        assert all(info["final_obs"][i] is None for i in np.flatnonzero(~terminated))
    assert checked > 6


# ------------------------------------------------------------------ against SingleAgentEnv
class _Mirror:
    """Deals for the engine that N ``SingleAgentEnv`` reproduce: every episode starts from a
    seed the test chooses (``first_dealer`` fixed), and a match's later hands come from a
    generator seeded alike, as ``raw_env`` deals them."""

    def __init__(self, n: int, dealer: int) -> None:
        self.dealer = dealer
        self.episode = [0] * n
        self.rngs = [np.random.default_rng(self.seed(i)) for i in range(n)]
        self.vec: ButifarraVectorEnv | None = None

    def seed(self, i: int) -> int:
        return 1000 * i + self.episode[i]

    def first_deals(self) -> dict[str, np.ndarray]:
        hands = [self.hands(i) for i in range(len(self.rngs))]
        return {"dealers": np.full(len(hands), self.dealer), "hands": np.stack(hands)}

    def hands(self, i: int) -> np.ndarray:
        masks = random_deal(self.rngs[i], self.dealer)
        return np.array([cards_of(m) for m in masks])

    def deal_fn(self, env_ids: np.ndarray, dealers: np.ndarray) -> np.ndarray:
        assert self.vec is not None
        hand_number, _ = self.vec.engine.match_info()
        out = []
        for i, d in zip(env_ids.tolist(), dealers.tolist(), strict=True):
            if hand_number[i] == 0:  # a new episode: a new seed
                self.episode[i] += 1
                self.rngs[i] = np.random.default_rng(self.seed(i))
                assert d == self.dealer
            masks = random_deal(self.rngs[i], d)
            out.append([cards_of(m) for m in masks])
        return np.array(out)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize(
    "options",
    [{}, {"target_score": 31, "butifarra_base": 1}, {"max_doubling_level": 0}],
    ids=["hand", "match", "no-doubling"],
)
def test_each_sub_env_is_a_single_agent_env_on_the_same_deals(
    mode: AutoresetMode, options: dict[str, Any]
) -> None:
    n, seat, dealer = 5, 1, 2
    opts = {**options, "first_dealer": dealer}
    vec = ButifarraVectorEnv(n, seat, _pick_batch, autoreset_mode=mode, **opts)
    singles = [SingleAgentEnv(seat, _pick, **opts) for _ in range(n)]
    mirror = _Mirror(n, dealer)
    mirror.vec = vec
    vec.engine.set_deal_fn(mirror.deal_fn)
    obs, info = vec.reset(seed=0, options=mirror.first_deals())
    expected = [s.reset(seed=mirror.seed(i))[0] for i, s in enumerate(singles)]
    rng = np.random.default_rng(7)
    pending = np.zeros(n, dtype=bool)
    episodes = hands = 0
    for _ in range(150):
        for i in range(n):
            np.testing.assert_array_equal(obs["observation"][i], expected[i]["observation"])
            want = expected[i]["action_mask"]
            if pending[i]:  # NEXT_STEP terminal row: the single env's all-zero mask, plus
                assert not want.any()  # the one ignored action every row offers here
                want = np.eye(N_ACTIONS, dtype=np.int8)[RESET_STEP_ACTION]
            np.testing.assert_array_equal(obs["action_mask"][i], want)
            np.testing.assert_array_equal(info["action_mask"][i], want)
        actions = _random_legal(rng, obs["action_mask"])
        obs, rewards, terminated, truncated, info = vec.step(actions)
        assert not truncated.any()
        for i, single in enumerate(singles):
            if pending[i]:  # NEXT_STEP: this step resets the sub-env
                expected[i], _ = single.reset(seed=mirror.seed(i))
                assert rewards[i] == 0 and not terminated[i]
                continue
            expected[i], reward, done, _, single_info = single.step(int(actions[i]))
            assert rewards[i] == reward  # exactly: same float64 product
            assert terminated[i] == done
            hands += "hand_result" in single_info
            if done and mode == AutoresetMode.SAME_STEP:
                final = info["final_obs"][i]
                np.testing.assert_array_equal(final["observation"], expected[i]["observation"])
                np.testing.assert_array_equal(final["action_mask"], expected[i]["action_mask"])
                expected[i], _ = single.reset(seed=mirror.seed(i))
            episodes += done
        pending = terminated & (mode == AutoresetMode.NEXT_STEP)
    assert episodes >= 2 * n
    if "target_score" in options:
        assert hands > episodes  # matches of several hands were compared


def test_opponents_get_uint8_batches_and_float_learners_the_scaled_view() -> None:
    seen: list[tuple[Any, ...]] = []

    class Lowest:
        def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
            seen.append((observations.dtype, observations.shape, action_masks.dtype))
            return np.argmax(action_masks != 0, axis=1)

    envs = ButifarraVectorEnv(4, seat=0, opponents=Lowest(), obs_format="float32")
    assert envs.single_observation_space["observation"] == gymnasium.spaces.Box(
        0, 1, (OBS_SIZE,), np.float32
    )
    obs, _ = envs.reset(seed=0)
    assert obs["observation"].dtype == np.float32 and envs.observation_space.contains(obs)
    for _ in range(5):
        obs, *_ = envs.step(np.argmax(obs["action_mask"] != 0, axis=1))
    assert seen and all(d == np.uint8 and s[1] == OBS_SIZE and m == np.int8 for d, s, m in seen)


def test_per_seat_opponents_each_see_only_their_own_seat() -> None:
    calls: dict[int, int] = {1: 0, 2: 0, 3: 0}

    def for_seat(s: int) -> Any:
        def policy(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
            # Seat 0 always deals: seen from seat s, the dealer is relative seat (0 - s) % 4.
            assert field(obs, "dealer")[:, (0 - s) % 4].all()
            calls[s] += len(obs)
            return np.argmax(masks != 0, axis=1)

        return policy

    opponents = {s: for_seat(s) for s in (1, 2, 3)}
    envs = ButifarraVectorEnv(3, seat=0, opponents=opponents, first_dealer=0)
    obs, _ = envs.reset(seed=5)
    for _ in range(30):
        assert (field(obs["observation"], "dealer")[:, 0] == 1).all()  # the learner's view
        obs, *_ = envs.step(np.argmax(obs["action_mask"] != 0, axis=1))
    assert all(c >= 30 for c in calls.values())


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seat": 4}, "seat must be an int 0-3"),
        ({"num_envs": 0}, "num_envs"),
        ({"autoreset_mode": AutoresetMode.DISABLED}, "autoreset_mode"),
        ({"autoreset_mode": "sometimes"}, "autoreset_mode"),
        ({"render_mode": "rgb_array"}, "render_mode must be None"),
        ({"obs_format": "float64"}, "obs_format must be one of"),
        ({"opponents": [None, None]}, "three"),
        ({"opponents": {1: None}}, "exactly the seats"),
        ({"opponents": [None, 3, None]}, "seat 2 must have act_batch"),
        ({"target_score": 0}, "target_score"),
        ({"reward_scale": 0}, "reward_scale"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kwargs: dict, match: str) -> None:
    args = {"num_envs": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        ButifarraVectorEnv(**args)


def test_bad_calls_are_refused_and_change_nothing() -> None:
    envs = ButifarraVectorEnv(3, seat=2)
    with pytest.raises(RuntimeError, match=r"reset\(\)"):
        envs.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(RuntimeError, match=r"reset\(\)"):
        envs.action_masks()
    with pytest.raises(ValueError, match="one int"):
        envs.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="unknown reset option"):
        envs.reset(seed=1, options={"reset_mask": np.ones(3, bool)})
    obs, _ = envs.reset(seed=1)
    before = obs["observation"].copy()
    illegal = np.argmax(obs["action_mask"] == 0, axis=1)
    with pytest.raises(ValueError, match="illegal action"):
        envs.step(illegal)
    with pytest.raises(ValueError, match="shape"):
        envs.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(envs.action_masks(), obs["action_mask"].astype(bool))
    legal = np.argmax(obs["action_mask"] != 0, axis=1)
    after, *_ = envs.step(legal)  # the refused calls changed nothing: play goes on
    twin = ButifarraVectorEnv(3, seat=2)
    twin_obs, _ = twin.reset(seed=1)
    np.testing.assert_array_equal(twin_obs["observation"], before)
    twin_after, *_ = twin.step(legal)
    np.testing.assert_array_equal(after["observation"], twin_after["observation"])


def test_a_failing_opponent_stops_the_env_until_reset() -> None:
    def broken(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        raise KeyError("boom")

    envs = ButifarraVectorEnv(2, seat=0, opponents=broken, first_dealer=0)
    envs.reset(seed=0)  # the dealer, seat 0, is the learner: no opponent has moved yet
    choose_oros = np.full(2, 48)
    with pytest.raises(KeyError, match="boom"):
        envs.step(choose_oros)  # seat 1 is asked to double next
    with pytest.raises(RuntimeError, match="failed.*reset"):
        envs.step(choose_oros)
    envs.reset(seed=0)
    np.testing.assert_array_equal(envs.action_masks()[:, 48:54], True)  # playable again
