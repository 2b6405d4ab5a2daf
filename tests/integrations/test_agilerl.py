"""AgileRL, unchanged: its off-policy trainer (``train_off_policy``) and ``DQN.test`` read the
legal actions from ``info["action_mask"]`` of a Gymnasium vector env, and its DQN's
``get_action(obs, epsilon, action_mask=...)`` plays the PettingZoo env turn by turn with the
mask from ``env.last()``'s info. No hand may end in the illegal-move penalty.

Skips without AgileRL. AgileRL 2.58 imports ``peft`` when its algorithms are imported
(``agilerl.distributed``), although peft is only in its LLM extras: without peft these
tests skip too.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import pytest

from tests.extras import need

torch = need("torch")
need("agilerl")
pytest.importorskip("peft", reason="agilerl 2.58 imports peft from its algorithms")

from agilerl.algorithms.dqn import DQN  # noqa: E402 - after the skips
from agilerl.components.replay_buffer import ReplayBuffer  # noqa: E402
from agilerl.training.train_off_policy import train_off_policy  # noqa: E402

from butifarra_env import GYM_ID, butifarra_v0  # noqa: E402
from butifarra_env.core.options import Options  # noqa: E402

REWARD_SCALE = 1 / 36  # docs/integrations.md's recommendation
PENALTY = -Options().worst_hand_loss * REWARD_SCALE
N_ENVS = 4


class HandEnds(gymnasium.Wrapper):
    """Keeps (reward, info) of every episode end of the env it wraps (one per sub-env)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.ends: list[tuple[float, dict[str, Any]]] = []

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self.ends.append((float(reward), info))
        return obs, reward, terminated, truncated, info


def _sync_envs(**kwargs: Any) -> tuple[gymnasium.vector.VectorEnv, list[HandEnds]]:
    """N single-agent envs in Gymnasium's SyncVectorEnv (illegal moves: the penalty)."""
    envs = gymnasium.make_vec(
        GYM_ID,
        num_envs=N_ENVS,
        vectorization_mode="sync",
        wrappers=[HandEnds],
        reward_scale=REWARD_SCALE,
        **kwargs,
    )
    return envs, list(envs.envs)


def _dqn(observation_space: Any, action_space: Any) -> DQN:
    torch.set_num_threads(1)
    torch.manual_seed(0)  # AgileRL's DQN explores with torch's generator
    return DQN(observation_space, action_space)


def test_train_off_policy_reads_masks_from_info() -> None:
    envs, wrapped = _sync_envs()
    agent = _dqn(envs.single_observation_space, envs.single_action_space)
    pop, fitnesses = train_off_policy(
        envs,
        "butifarra",
        "DQN",
        [agent],
        ReplayBuffer(10_000),
        max_steps=2000,
        evo_steps=1000,
        eps_start=1.0,  # mostly random actions: the mask is all that keeps them legal
        eps_decay=0.999,
        verbose=False,
    )
    assert pop == [agent] and agent.steps >= 2000 and len(fitnesses) == 1
    ends = [end for env in wrapped for end in env.ends]
    assert len(ends) > 100  # training and evaluation hands
    # a penalised move always says so in info; the reward alone cannot tell, since a real
    # hand lost at the top of the doubling chain scores exactly the penalty
    assert all("illegal_action" not in info for _, info in ends)
    assert all("hand_result" in info for _, info in ends)  # each ended as a played hand


def test_without_the_info_mask_dqn_plays_illegal_moves() -> None:
    """The check above can fail: the same agent, with the mask removed from info."""

    class NoMask(gymnasium.Wrapper):
        def reset(self, **kwargs: Any) -> Any:
            obs, info = self.env.reset(**kwargs)
            return obs, {k: v for k, v in info.items() if k != "action_mask"}

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            return (
                obs,
                reward,
                terminated,
                truncated,
                {k: v for k, v in info.items() if k != "action_mask"},
            )

    envs = gymnasium.make_vec(
        GYM_ID,
        num_envs=N_ENVS,
        vectorization_mode="sync",
        wrappers=[HandEnds, NoMask],
        reward_scale=REWARD_SCALE,
    )
    agent = _dqn(envs.single_observation_space, envs.single_action_space)
    agent.test(envs, loop=1)  # greedy, reading info.get("action_mask") -> None
    ends = [end for env in envs.envs for end in env.get_wrapper_attr("ends")]
    assert any("illegal_action" in info and reward == PENALTY for reward, info in ends)


def test_dqn_test_on_the_gymnasium_vector_env() -> None:
    """``gymnasium.make_vec`` builds the batched vector env (which raises on an illegal
    action instead of penalising); AgileRL's evaluation loop plays whole hands on it."""
    envs = gymnasium.make_vec(GYM_ID, num_envs=N_ENVS, reward_scale=REWARD_SCALE)
    assert type(envs).__name__ == "ButifarraVectorEnv"
    agent = _dqn(envs.single_observation_space, envs.single_action_space)
    score = agent.test(envs, loop=2)  # the batched env raises on an illegal action
    # the mean of 2 x N_ENVS whole hands, each worth a whole number of points / 36
    hands = 2 * N_ENVS
    assert score * 36 * hands == pytest.approx(round(score * 36 * hands), abs=1e-6)
    envs.close()


def test_get_action_turn_by_turn_on_the_pettingzoo_env() -> None:
    """AgileRL's pattern for turn-based PettingZoo games: one DQN for every seat, the mask
    from ``env.last()``'s info, epsilon-greedy (its exploration also obeys the mask)."""
    env = butifarra_v0.env(reward_scale=REWARD_SCALE)
    agent = _dqn(env.observation_space("player_0"), env.action_space("player_0"))
    for seed in range(6):
        env.reset(seed=seed)
        steps, final = 0, {}
        for name in env.agent_iter():
            obs, reward, terminated, truncated, info = env.last()
            if terminated or truncated:
                final[name] = reward
                env.step(None)
                continue
            batch = {k: v[None] for k, v in obs.items()}
            action = agent.get_action(batch, epsilon=0.5, action_mask=info["action_mask"][None])
            env.step(int(action[0]))
            steps += 1
        assert steps >= 49  # the whole hand was played
        r = [final[a] for a in env.possible_agents]
        assert r[0] == r[2] == -r[1] == -r[3] != PENALTY  # RULES.md rewards, no penalty
