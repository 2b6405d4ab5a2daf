"""Tianshou 2.x, unchanged: ``butifarra_v0.env()`` inside Tianshou's own ``PettingZooEnv``
wrapper, ``DummyVectorEnv`` and ``Collector``, the mask read from ``obs.mask`` by Tianshou's
DQN and masked random policies; then a tiny ``run_training`` and the learner in the
duplicate arena through :func:`agents.adapters.as_agent`. Skips without Tianshou.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.extras import need

need("tianshou")
torch = need("torch")

from tianshou.algorithm import (  # noqa: E402 - after the skip
    DQN,
    MARLRandomDiscreteMaskedOffPolicyAlgorithm,
    MultiAgentOffPolicyAlgorithm,
)
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy  # noqa: E402
from tianshou.algorithm.optim import AdamOptimizerFactory  # noqa: E402
from tianshou.data import Batch, Collector, CollectStats, VectorReplayBuffer  # noqa: E402
from tianshou.env import DummyVectorEnv  # noqa: E402
from tianshou.env.pettingzoo_env import PettingZooEnv  # noqa: E402
from tianshou.trainer import OffPolicyTrainerParams  # noqa: E402
from tianshou.utils.net.common import Net  # noqa: E402

from agents.adapters import as_agent  # noqa: E402
from agents.evaluation.arena import duel  # noqa: E402
from butifarra_env import butifarra_v0  # noqa: E402
from butifarra_env.core.observation import OBS_SIZE  # noqa: E402

N_ENVS = 4
MIN_HAND, MAX_HAND = 49, 58  # player actions in a hand: 48 cards + 1-10 bidding actions


def _env() -> PettingZooEnv:
    """What a Tianshou user writes: the PettingZoo env in Tianshou's wrapper (reward scale as
    docs/integrations.md recommends)."""
    return PettingZooEnv(butifarra_v0.env(reward_scale=1 / 36))


@pytest.fixture(scope="module")
def marl() -> tuple[MultiAgentOffPolicyAlgorithm, DQN]:
    """A DQN learner for team A (seats 0 and 2 share it), masked random for team B."""
    torch.set_num_threads(1)
    np.random.seed(0)  # noqa: NPY002 - Tianshou's exploration draws from numpy's global one
    torch.manual_seed(0)
    env = _env()
    assert env.observation_space["observation"].shape == (OBS_SIZE,)
    net = Net(state_shape=(OBS_SIZE,), action_shape=env.action_space.n, hidden_sizes=[64])
    policy = DiscreteQLearningPolicy(
        model=net, action_space=env.action_space, eps_training=0.2, eps_inference=0.0
    )
    learner = DQN(policy=policy, optim=AdamOptimizerFactory(lr=1e-3), target_update_freq=50)
    rand = MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=env.action_space)
    return MultiAgentOffPolicyAlgorithm(algorithms=[learner, rand, learner, rand], env=env), learner


def _envs(seed: int) -> DummyVectorEnv:
    envs = DummyVectorEnv([_env for _ in range(N_ENVS)])
    envs.seed(seed)
    return envs


def _check_hands(stats: CollectStats) -> None:
    """Every episode is a whole hand with the RULES.md zero-sum team rewards: an illegal
    move would end it early, with the penalty for the mover alone."""
    returns, lens = np.asarray(stats.returns), np.asarray(stats.lens)
    assert returns.shape == (stats.n_collected_episodes, 4) and len(returns) > 0
    assert ((lens >= MIN_HAND) & (lens <= MAX_HAND)).all(), lens
    np.testing.assert_allclose(returns[:, 0], returns[:, 2])
    np.testing.assert_allclose(returns[:, 1], returns[:, 3])
    np.testing.assert_allclose(returns[:, 0], -returns[:, 1])


def test_collector_reads_the_mask_and_plays_only_legal_moves(marl) -> None:
    algorithm, _ = marl
    collector = Collector[CollectStats](
        algorithm, _envs(0), VectorReplayBuffer(4000, N_ENVS), exploration_noise=True
    )
    stats = collector.collect(n_step=1200, reset_before_collect=True)
    _check_hands(stats)
    data = collector.buffer[collector.buffer.sample_indices(0)]
    assert len(data) >= 1200
    masks = np.asarray(data.obs.mask)
    assert masks.shape == (len(data), 56) and masks.dtype == bool
    assert masks.any(axis=1).all() and masks.sum(axis=1).mean() < 12  # real masks, not all-True
    assert masks[np.arange(len(data)), data.act].all()  # each stored action was legal
    assert set(data.obs.agent_id) == {f"player_{i}" for i in range(4)}


def test_ignoring_the_mask_ends_hands_in_the_penalty() -> None:
    """The checks above can fail: uniform actions from the action space (Tianshou's
    ``random=True``) hit illegal moves, and those hands end early, penalised."""
    rand = MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=_env().action_space)
    algorithm = MultiAgentOffPolicyAlgorithm(algorithms=[rand] * 4, env=_env())
    collector = Collector[CollectStats](algorithm, _envs(1))
    stats = collector.collect(n_episode=8, random=True, reset_before_collect=True)
    assert (np.asarray(stats.lens) < MIN_HAND).any()
    with pytest.raises(AssertionError):
        _check_hands(stats)


class _GreedyQ:
    """A trained Tianshou Q-policy as a batch policy for the arena."""

    def __init__(self, policy: DiscreteQLearningPolicy) -> None:
        self.policy = policy

    @torch.no_grad()
    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        obs = Batch(obs=observations.astype(np.float32), mask=action_masks != 0)
        return np.asarray(self.policy(Batch(obs=obs, info=Batch())).act)


def test_tiny_training_run_then_the_arena(marl) -> None:
    algorithm, learner = marl
    train = Collector[CollectStats](
        algorithm, _envs(2), VectorReplayBuffer(4000, N_ENVS), exploration_noise=True
    )
    test = Collector[CollectStats](algorithm, _envs(3), exploration_noise=True)
    before = [p.detach().clone() for p in learner.policy.model.parameters()]
    result = algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=train,
            test_collector=test,
            max_epochs=1,
            epoch_num_steps=600,
            collection_step_num_env_steps=40,
            test_step_num_episodes=N_ENVS,
            batch_size=64,
            update_step_num_gradient_steps_per_sample=0.1,
            multi_agent_return_reduction=lambda returns: returns[:, 0],
            show_progress=False,
            verbose=False,
        )
    )
    assert result.train_step >= 600 and result.update_step > 0 and result.test_episode > 0
    after = list(learner.policy.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))

    agent = as_agent(_GreedyQ(learner.policy), name="tianshou-dqn")
    res = duel(agent, "random", n_deals=16, seed=4)  # AgentError if any move were illegal
    assert res.name_a == "tianshou-dqn" and len(res.hands["diff_a"]) == 32
