"""What external RL frameworks look for: the float32 observation format in every env, action
masks in the observation, in ``info`` and through ``action_masks()``, and (when installed)
Gymnasium's RecordVideo, Stable-Baselines3 and sb3-contrib using the env unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import butifarra_env  # noqa: F401 - registers the Gymnasium id
from butifarra_env import butifarra_v0
from butifarra_env.core.observation import (
    OBS_SIZE,
    STATE_SIZE,
    encode_state,
    scale_vector,
    state_scale_vector,
)
from butifarra_env.envs.batched import BatchedEnv
from butifarra_env.envs.gym_env import SingleAgentEnv
from butifarra_env.envs.gym_vector import ButifarraVectorEnv
from tests.extras import need

GYM_ID = "butifarra_env/Butifarra-v0"
SCALE = scale_vector()
STATE_SCALE = state_scale_vector()
MATCH = {"target_score": 31, "butifarra_base": 1}


def _same_scaled(f: np.ndarray, u: np.ndarray, scale: np.ndarray = SCALE) -> None:
    assert u.dtype == np.uint8 and f.dtype == np.float32
    np.testing.assert_array_equal(f, u * scale)  # exactly, not approximately
    assert ((f >= 0.0) & (f <= 1.0)).all()


def _legal(rng: np.random.Generator, mask: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


# ------------------------------------------------------------------ float32 observations
def test_state_scale_vector_puts_every_full_state_in_the_unit_interval() -> None:
    e = butifarra_v0.raw_env(target_score=300)
    e.reset(options={"dealer": 0, "hands": [list(range(12 * s, 12 * s + 12)) for s in range(4)],
                     "hand_number": 400, "match_scores": [290, 299]})  # fmt: skip
    while not e.game.is_over:
        e.step(e.legal_actions()[0])
    state = encode_state(e.game) * STATE_SCALE
    assert state.max() == 1.0 and state.min() == 0.0
    assert STATE_SCALE.shape == (STATE_SIZE,) and STATE_SCALE.dtype == np.float32


@pytest.mark.parametrize("options", [{}, MATCH], ids=["hand", "match"])
def test_raw_env_float32_is_uint8_times_scale_at_every_step(options: dict) -> None:
    u = butifarra_v0.raw_env(**options)
    f = butifarra_v0.raw_env(obs_format="float32", **options)
    space = f.observation_space("player_0")
    assert space["observation"] == gymnasium.spaces.Box(0, 1, (OBS_SIZE,), np.float32)
    assert f.state_space == gymnasium.spaces.Box(0, 1, (STATE_SIZE,), np.float32)
    assert space["action_mask"] == u.observation_space("player_0")["action_mask"]
    rng = np.random.default_rng(0)
    steps = 0
    for seed in range(3):
        u.reset(seed=seed)
        f.reset(seed=seed)
        while not all(u.terminations.values()):
            for agent in u.agents:
                ou, of = u.observe(agent), f.observe(agent)
                _same_scaled(of["observation"], ou["observation"])
                np.testing.assert_array_equal(of["action_mask"], ou["action_mask"])
                assert space.contains(of)
            _same_scaled(f.state(), u.state(), STATE_SCALE)
            action = _legal(rng, u.observe(u.agent_selection)["action_mask"])
            u.step(action)
            f.step(action)
            assert u.rewards == f.rewards
            steps += 1
    assert steps > 3 * 12 * 4


def test_single_agent_env_float32_is_uint8_times_scale() -> None:
    u = SingleAgentEnv(seat=1, **MATCH)
    f = SingleAgentEnv(seat=1, obs_format="float32", **MATCH)
    assert f.observation_space["observation"].dtype == np.float32
    rng = np.random.default_rng(1)
    for seed in range(3):
        (ou, iu), (of, if_) = u.reset(seed=seed), f.reset(seed=seed)
        done = False
        while True:
            _same_scaled(of["observation"], ou["observation"])
            assert f.observation_space.contains(of)
            np.testing.assert_array_equal(if_["action_mask"], iu["action_mask"])
            if done:
                break
            action = _legal(rng, ou["action_mask"])
            ou, ru, done, _, iu = u.step(action)
            of, rf, _, _, if_ = f.step(action)
            assert ru == rf


def test_batched_env_float32_is_uint8_times_scale_with_state_and_final_views() -> None:
    u = BatchedEnv(16, seed=4, keep_final_obs=True, **MATCH)
    f = BatchedEnv(16, seed=4, keep_final_obs=True, obs_format="float32", **MATCH)
    ou, mu, _ = u.reset()
    of, mf, _ = f.reset()
    rng = np.random.default_rng(2)
    finals = 0
    for _ in range(300):
        _same_scaled(of, ou)
        np.testing.assert_array_equal(mf, mu)
        _same_scaled(f.state(), u.state(), STATE_SCALE)
        actions = np.array([_legal(rng, m) for m in mu])
        ou, mu, _, ru, du = u.step(actions)
        of, mf, _, rf, df = f.step(actions)
        np.testing.assert_array_equal(ru, rf)
        (iu, vu), (if_, vf) = u.final_observations(), f.final_observations()
        np.testing.assert_array_equal(iu, if_)
        np.testing.assert_array_equal(iu, np.flatnonzero(du))
        _same_scaled(vf, vu)
        finals += len(iu)
    assert finals > 3


def test_batched_env_refuses_bad_formats_and_final_views_without_the_flag() -> None:
    with pytest.raises(ValueError, match="obs_format must be one of"):
        BatchedEnv(2, obs_format="half")
    with pytest.raises(ValueError, match="keep_final_obs"):
        BatchedEnv(2, keep_final_obs=1)
    eng = BatchedEnv(2, seed=0)
    eng.reset()
    with pytest.raises(RuntimeError, match="keep_final_obs=True"):
        eng.final_observations()
    with pytest.raises(ValueError, match="active must be a bool array"):
        eng.step(np.array([48, 48]), active=np.array([1, 0]))


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_env_float32_is_uint8_times_scale(mode: AutoresetMode) -> None:
    u = ButifarraVectorEnv(6, seat=3, autoreset_mode=mode)
    f = ButifarraVectorEnv(6, seat=3, autoreset_mode=mode, obs_format="float32")
    (ou, _), (of, _) = u.reset(seed=9), f.reset(seed=9)
    rng = np.random.default_rng(3)
    ended = 0
    for _ in range(60):
        _same_scaled(of["observation"], ou["observation"])
        np.testing.assert_array_equal(of["action_mask"], ou["action_mask"])
        assert f.observation_space.contains(of)
        actions = np.array([_legal(rng, m) if m.any() else 0 for m in ou["action_mask"]])
        ou, ru, tu, _, iu = u.step(actions)
        of, rf, tf, _, if_ = f.step(actions)
        np.testing.assert_array_equal(ru, rf)
        np.testing.assert_array_equal(tu, tf)
        for i in np.flatnonzero(tu) if mode == AutoresetMode.SAME_STEP else []:
            _same_scaled(if_["final_obs"][i]["observation"], iu["final_obs"][i]["observation"])
            ended += 1
    assert mode == AutoresetMode.NEXT_STEP or ended > 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: butifarra_v0.env(obs_format="f32"),
        lambda: butifarra_v0.raw_env(obs_format=np.float32),
        lambda: SingleAgentEnv(obs_format="float64"),
        lambda: gymnasium.make(GYM_ID, obs_format="int"),
        lambda: ButifarraVectorEnv(2, obs_format=None),
    ],
)
def test_every_env_refuses_an_unknown_obs_format(make: Any) -> None:
    with pytest.raises(ValueError, match=r"obs_format must be one of \['uint8', 'float32'\]"):
        make()


# ------------------------------------------------------------------ masks where frameworks look
@pytest.mark.parametrize("options", [{}, MATCH], ids=["hand", "match"])
def test_aec_infos_carry_the_mask_of_the_agent_to_move_only(options: dict) -> None:
    env = butifarra_v0.env(**options)
    rng = np.random.default_rng(4)
    decisions = 0
    for seed in range(3):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            others = [a for a in env.agents if a != agent]
            assert all("action_mask" not in env.infos[a] for a in others)
            if term or trunc:
                assert "action_mask" not in info
                env.step(None)
                continue
            assert info["action_mask"].dtype == np.int8
            np.testing.assert_array_equal(info["action_mask"], obs["action_mask"])
            action = _legal(rng, obs["action_mask"])
            info["action_mask"][:] = 0  # the caller's own copies: the env's mask is untouched
            obs["action_mask"][:] = 0
            assert env.observe(agent)["action_mask"][action] == 1
            env.step(action)
            decisions += 1
    assert decisions > 3 * 12 * 4


def test_gymnasium_make_offers_action_masks_directly_and_through_wrappers() -> None:
    env = gymnasium.make(GYM_ID, seat=1)
    with pytest.raises(RuntimeError, match=r"reset\(\) before action_masks"):
        env.action_masks()
    obs, info = env.reset(seed=0)
    np.testing.assert_array_equal(env.action_masks(), obs["action_mask"].astype(bool))
    np.testing.assert_array_equal(info["action_mask"], obs["action_mask"])
    wrapped = gymnasium.wrappers.RecordEpisodeStatistics(env)
    assert not hasattr(wrapped, "action_masks")  # Gymnasium 1.x wrappers do not forward
    masks = wrapped.get_wrapper_attr("action_masks")
    done = False
    rng = np.random.default_rng(5)
    while not done:
        mask = masks()
        assert mask.dtype == bool and mask.shape == (56,)
        obs, reward, done, _, info = wrapped.step(_legal(rng, mask))
        np.testing.assert_array_equal(info["action_mask"], obs["action_mask"])
    assert "episode" in info and not masks().any()
    with pytest.raises(RuntimeError, match="over"):
        env.step(0)


# ------------------------------------------------------------------ frameworks (when installed)
def test_record_video_writes_a_video(tmp_path: Path) -> None:
    need("moviepy")
    env = gymnasium.make(GYM_ID, render_mode="rgb_array", seat=0)
    folder = tmp_path / "videos"
    env = gymnasium.wrappers.RecordVideo(env, str(folder), episode_trigger=lambda e: True)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(6)
    done = False
    while not done:
        obs, _, done, _, _ = env.step(_legal(rng, obs["action_mask"]))
    env.close()
    videos = list(folder.glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000


def test_stable_baselines3_make_vec_env_constructs_and_steps() -> None:
    need("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env
    from stable_baselines3.common.env_util import make_vec_env

    check_env(gymnasium.make(GYM_ID, seat=2), warn=False)
    vec = make_vec_env(GYM_ID, n_envs=4, seed=0)  # passes render_mode="rgb_array"
    obs = vec.reset()
    assert obs["observation"].shape == (4, OBS_SIZE) and obs["action_mask"].shape == (4, 56)
    rng = np.random.default_rng(7)
    ends = 0
    for _ in range(40):
        masks = np.stack(vec.env_method("action_masks"))
        np.testing.assert_array_equal(masks, obs["action_mask"].astype(bool))
        obs, rewards, dones, infos = vec.step(np.array([_legal(rng, m) for m in masks]))
        ends += int(dones.sum())
        assert all(i["action_mask"].shape == (56,) for i in infos)
    assert ends > 0  # SB3 reset the finished hands itself
    images = vec.get_images()
    assert len(images) == 4 and all(im.shape == (720, 960, 3) for im in images)
    vec.close()


def test_sb3_contrib_maskable_ppo_finds_the_masks_and_learns_through_env_kwargs() -> None:
    """A short learn() through make_vec_env's env_kwargs (reward_scale): the update changes the
    policy, no sampled action is illegal (the env would end the hand with a penalty and
    say so in ``info``), and the rewards SB3 sees are the scaled ones."""
    need("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Watch(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.infos: list[dict] = []
            self.rewards: list[float] = []

        def _on_step(self) -> bool:
            self.infos.extend(self.locals["infos"])
            self.rewards.extend(float(r) for r in self.locals["rewards"])
            return True

    vec = make_vec_env(GYM_ID, n_envs=2, seed=0, env_kwargs={"reward_scale": 1 / 36})
    assert is_masking_supported(vec)
    obs = vec.reset()
    np.testing.assert_array_equal(get_action_masks(vec), obs["action_mask"].astype(bool))
    model = MaskablePPO("MultiInputPolicy", vec, n_steps=64, batch_size=32, n_epochs=1, seed=0)
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    watch = Watch()
    model.learn(total_timesteps=128, callback=watch)
    after = model.policy.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert any(k.startswith("action_net") for k in changed), changed
    assert any(k.startswith("value_net") for k in changed), changed
    assert len(watch.infos) == 128
    assert not [i for i in watch.infos if "illegal_action" in i]
    ends = [r for r, i in zip(watch.rewards, watch.infos, strict=True) if "episode" in i]
    assert len(ends) >= 4  # a hand is about 13-16 learner decisions
    assert all(abs(r * 36 - round(r * 36)) < 1e-4 for r in ends)  # whole points / 36
    assert any(r != round(r) for r in ends)  # scaled: unscaled scores are whole numbers
    vec.close()
