"""Stable-Baselines3 / sb3-contrib, unchanged: ``MaskablePPO`` trains through the standard
``make_vec_env("butifarra_env/Butifarra-v0", n_envs=4)`` with its defaults (SB3 asks for
``render_mode="rgb_array"``; no env_kwargs), finds the masks through ``action_masks()``, and
the trained model then plays in the duplicate arena through
:func:`agents.adapters.as_agent`.

Also here: :func:`agents.adapters.as_agent` on plain callables and policy objects (no
framework needed) and its refusals. Tests that need SB3 skip without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agents.adapters import PolicyAgent, PredictAgent, as_agent, observation_builder
from agents.base import Agent
from agents.evaluation.arena import AgentError, duel
from agents.random_agent import RandomAgent
from butifarra_env import GYM_ID
from butifarra_env.core.observation import OBS_SIZE, scale_vector
from tests.extras import need

N_ENVS = 4
TRAIN_STEPS = 4096


def _sb3() -> tuple[Any, Any, Any]:
    """MaskablePPO, make_vec_env and SB3's callback base (the test skips without them)."""
    need("stable_baselines3")
    need("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)  # a small network on a shared CPU
    return MaskablePPO, make_vec_env, BaseCallback


def _episode_ends(base_callback: type) -> Any:
    """A callback that keeps the info of every episode end SB3 sees during learn()."""

    class EpisodeEnds(base_callback):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.ends: list[dict[str, Any]] = []

        def _on_step(self) -> bool:
            for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
                if done:
                    self.ends.append(info)
            return True

    return EpisodeEnds()


@pytest.fixture(scope="module")
def trained() -> Any:
    """MaskablePPO trained for a few thousand steps on make_vec_env's defaults."""
    maskable_ppo, make_vec_env, base_callback = _sb3()
    vec = make_vec_env(GYM_ID, n_envs=N_ENVS, seed=0)
    assert vec.get_attr("render_mode") == ["rgb_array"] * N_ENVS  # SB3's own default
    model = maskable_ppo("MultiInputPolicy", vec, n_steps=256, batch_size=256, seed=0)
    ends = _episode_ends(base_callback)
    initial = {k: v.detach().clone() for k, v in model.policy.state_dict().items()}
    model.learn(total_timesteps=TRAIN_STEPS, callback=ends)
    yield model, vec, ends.ends, initial
    vec.close()


def test_maskable_ppo_trains_on_make_vec_env_defaults_without_illegal_moves(trained) -> None:
    model, vec, ends, initial = trained
    assert model.num_timesteps >= TRAIN_STEPS
    assert len(ends) > 100  # a hand is about 13 learner decisions
    assert all("illegal_action" not in info for info in ends)
    assert all(info["episode"]["r"] > -1152 for info in ends)  # the penalty is -1152
    import torch

    trained_params = model.policy.state_dict()  # it really trained: every layer moved
    unchanged = [k for k, v in initial.items() if torch.equal(v, trained_params[k])]
    assert not [k for k in unchanged if k.endswith("weight")], unchanged


def test_without_masks_the_same_training_ends_hands_in_the_penalty() -> None:
    """The check above can fail: with masking off, MaskablePPO plays illegal moves."""
    maskable_ppo, make_vec_env, base_callback = _sb3()
    vec = make_vec_env(GYM_ID, n_envs=N_ENVS, seed=0)
    model = maskable_ppo("MultiInputPolicy", vec, n_steps=64, batch_size=256, n_epochs=1, seed=0)
    ends = _episode_ends(base_callback)
    model.learn(total_timesteps=256, callback=ends, use_masking=False)
    illegal = [info for info in ends.ends if "illegal_action" in info]
    assert illegal and all(info["episode"]["r"] == -1152 for info in illegal)
    vec.close()


def test_as_agent_feeds_the_model_what_it_was_trained_on(trained) -> None:
    model, vec, *_ = trained
    agent = as_agent(model)
    assert isinstance(agent, PredictAgent) and agent.name == "MaskablePPO"
    obs = vec.reset()
    masks = np.stack(vec.env_method("action_masks"))
    expected, _ = model.predict(obs, action_masks=masks, deterministic=True)
    got = agent.act_batch(obs["observation"], obs["action_mask"])
    np.testing.assert_array_equal(got, expected)
    assert got.dtype.kind in "iu" and masks[np.arange(N_ENVS), got].all()
    assert agent.act(obs["observation"][0], obs["action_mask"][0]) == expected[0]


def test_trained_model_plays_a_duplicate_duel(trained) -> None:
    model, *_ = trained
    agent = as_agent(model, name="sb3")
    result = duel(agent, "random", n_deals=32, seed=5)
    assert (result.name_a, result.name_b, result.n_deals) == ("sb3", "random", 32)
    assert len(result.hands["diff_a"]) == 64 and result.ci_low < result.ci_high
    again = duel(as_agent(model), RandomAgent(), n_deals=32, seed=5)  # greedy: reproducible
    np.testing.assert_array_equal(again.hands["diff_a"], result.hands["diff_a"])


def test_as_agent_scales_a_float32_model_like_the_env() -> None:
    maskable_ppo, make_vec_env, _ = _sb3()
    vec = make_vec_env(GYM_ID, n_envs=2, seed=1, env_kwargs={"obs_format": "float32"})
    same_deals = make_vec_env(GYM_ID, n_envs=2, seed=1)  # uint8, what the arena hands out
    model = maskable_ppo("MultiInputPolicy", vec, n_steps=64, seed=1)  # untrained is enough
    assert model.observation_space["observation"].dtype == np.float32
    obs, raw = vec.reset(), same_deals.reset()["observation"]
    masks = np.stack(vec.env_method("action_masks"))
    built = observation_builder(model.observation_space)(raw, obs["action_mask"])
    np.testing.assert_array_equal(built["observation"], obs["observation"])  # same values
    expected, _ = model.predict(obs, action_masks=masks, deterministic=True)
    np.testing.assert_array_equal(as_agent(model).act_batch(raw, obs["action_mask"]), expected)
    vec.close()
    same_deals.close()


# ------------------------------------------------------------------ as_agent, no framework
def _lowest_legal(observation: np.ndarray, action_mask: np.ndarray) -> int:
    return int(np.flatnonzero(action_mask)[0])


class _Batched:
    """A policy object that only knows batches, and counts how it was called."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.seeds: list[int | None] = []

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        self.calls.append(len(observations))
        return np.argmax(action_masks != 0, axis=1)

    def reset(self, seed: int | None = None) -> None:
        self.seeds.append(seed)


def test_a_function_plays_the_arena_like_the_equivalent_agent() -> None:
    fn_agent = as_agent(_lowest_legal)
    assert isinstance(fn_agent, PolicyAgent) and fn_agent.name == "_lowest_legal"
    batched = _Batched()
    res_fn = duel(fn_agent, "rule", n_deals=8, seed=3)
    res_batch = duel(as_agent(batched, name="lowest"), "rule", n_deals=8, seed=3)
    np.testing.assert_array_equal(res_fn.hands["diff_a"], res_batch.hands["diff_a"])
    assert res_batch.name_a == "lowest"
    assert max(batched.calls) > 1  # asked in batches, not one decision at a time
    assert batched.seeds  # the arena reseeds agents through reset()


def test_an_agent_comes_back_as_it_is_or_renamed() -> None:
    rule = RandomAgent(seed=0)
    assert as_agent(rule) is rule
    renamed = as_agent(rule, name="coin")
    assert isinstance(renamed, Agent) and renamed.name == "coin" and rule.name == "random"
    obs = np.zeros((3, OBS_SIZE), np.uint8)
    masks = np.zeros((3, 56), np.int8)
    masks[:, [4, 9]] = 1
    np.testing.assert_allclose(renamed.action_probs_batch(obs, masks)[:, [4, 9]], 0.5)


def test_a_function_that_returns_an_illegal_action_is_reported_by_the_arena() -> None:
    with pytest.raises(AgentError, match="always_pass"):
        duel(as_agent(lambda o, m: 55, name="always_pass"), "random", n_deals=1)


class _PlainPredict:
    """SB3's predict() without action_masks (a plain PPO)."""

    observation_space = None

    def predict(self, observation: Any, deterministic: bool = False) -> tuple[Any, None]:
        return np.zeros(1, np.int64), None


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (42, "needs one of act\\(observation, action_mask\\)"),
        ("not a policy", "callable \\(observation, action_mask\\) -> action"),
        (_PlainPredict(), "predict\\(\\) takes no action_masks"),
    ],
)
def test_as_agent_refuses_what_it_cannot_play(obj: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        as_agent(obj)


def test_as_agent_refuses_a_bad_name() -> None:
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        as_agent(_lowest_legal, name="")


def test_observation_builder_formats_and_refusals() -> None:
    import gymnasium

    box = gymnasium.spaces.Box
    obs = np.full((2, OBS_SIZE), 3, np.uint8)
    masks = np.zeros((2, 56), np.int8)
    flat = observation_builder(box(0, 255, (OBS_SIZE,), np.uint8))(obs, masks)
    np.testing.assert_array_equal(flat, obs)
    rllib = gymnasium.spaces.Dict(
        {
            "observations": box(0.0, 255.0, (OBS_SIZE,), np.float32),  # raw counts as floats
            "action_mask": box(0.0, 1.0, (56,), np.float32),
        }
    )
    built = observation_builder(rllib)(obs, masks)
    assert built["observations"].dtype == np.float32 and (built["observations"] == 3).all()
    assert built["action_mask"].dtype == np.float32
    scaled = observation_builder(box(0.0, 1.0, (OBS_SIZE,), np.float32))(obs, masks)
    np.testing.assert_allclose(scaled, obs * scale_vector())
    bad = [
        (box(0, 255, (10,), np.uint8), "shape \\(491,\\)"),
        (gymnasium.spaces.Dict({"obs": box(0, 255, (OBS_SIZE,), np.uint8)}), "got the keys"),
        (gymnasium.spaces.Discrete(3), "must be a Box"),
        (None, "must be a Box"),
    ]
    for space, message in bad:
        with pytest.raises(ValueError, match=message):
            observation_builder(space)
