"""The vector env as Gymnasium's vector API and masked learners use it: a legal action in
every row (the NEXT_STEP reset row too), ``call`` / ``get_attr`` / ``set_attr``."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.envs.gym_vector import RESET_STEP_ACTION, ButifarraVectorEnv


def _masked_sample(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """What MaskablePPO / CleanRL-style code does: normalise the mask into probabilities for
    every row and draw (a row without a legal action would divide by zero)."""
    probs = masks.astype(np.float64)
    sums = probs.sum(axis=1, keepdims=True)
    assert (sums > 0).all(), "a row offers no legal action"
    cum = (probs / sums).cumsum(axis=1)
    return (cum < rng.random((len(masks), 1))).sum(axis=1)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_a_masked_sampler_can_act_on_every_row_through_many_episodes(mode) -> None:
    envs = ButifarraVectorEnv(16, seat=1, autoreset_mode=mode)
    assert envs.metadata["autoreset_mode"] == mode
    obs, _ = envs.reset(seed=4)
    rng = np.random.default_rng(0)
    ended_total = 0
    reset_rows_seen = 0
    for _ in range(200):
        actions = _masked_sample(rng, obs["action_mask"])
        obs, _, terminated, _, info = envs.step(actions)
        ended_total += int(terminated.sum())
        if mode == AutoresetMode.NEXT_STEP and terminated.any():
            rows = obs["action_mask"][terminated]
            assert (rows.sum(axis=1) == 1).all() and (rows[:, RESET_STEP_ACTION] == 1).all()
            reset_rows_seen += len(rows)
        if mode == AutoresetMode.SAME_STEP and terminated.any():
            assert info["_final_obs"].sum() == terminated.sum()
    assert ended_total >= 32
    assert mode == AutoresetMode.SAME_STEP or reset_rows_seen == ended_total


def test_call_and_get_attr_give_each_sub_envs_view() -> None:
    envs = gymnasium.make_vec("butifarra_env/Butifarra-v0", num_envs=3, seat=2)
    obs, _ = envs.reset(seed=0)
    masks = envs.call("action_masks")
    assert len(masks) == 3
    for i, m in enumerate(masks):
        assert m.dtype == bool and (m == obs["action_mask"][i].astype(bool)).all()
    assert envs.get_attr("seat") == (2, 2, 2)
    assert envs.get_attr("observation_space") == (envs.single_observation_space,) * 3
    assert envs.get_attr("action_space")[0].n == N_ACTIONS
    assert envs.call("reward_scale") == (1.0, 1.0, 1.0)  # not callable: returned as it is
    with pytest.raises(AttributeError, match="no attribute 'frameskip'; they have"):
        envs.get_attr("frameskip")


def test_set_attr_stores_per_sub_env_values_and_refuses_shared_settings() -> None:
    envs = ButifarraVectorEnv(3)
    envs.set_attr("label", ["a", "b", "c"])
    assert envs.get_attr("label") == ("a", "b", "c")
    envs.set_attr("label", "same")
    assert envs.get_attr("label") == ("same",) * 3
    with pytest.raises(ValueError, match="needs one value or 3 of them, got 2"):
        envs.set_attr("label", [1, 2])
    with pytest.raises(ValueError, match="'reward_scale' is shared by the 3 hands"):
        envs.set_attr("reward_scale", 0.5)
    assert envs.reward_scale == 1.0 and envs.get_attr("label") == ("same",) * 3
