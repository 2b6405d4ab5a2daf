"""PufferLib (``pufferlib-core`` 3.0.x) with no adapter: its Gymnasium and PettingZoo emulation
over the env, its vector API stepping legal actions read from the flattened observation, and
its trainer ``PuffeRL`` (``evaluate`` + ``train``) on the CPU.

``pufferlib-core`` pins ``torch==2.9.0`` (CUDA) and its compiled ``pufferlib._C`` needs CUDA
torch (``libc10_cuda.so``), so it does not share the main environment: ``.ci/pufferlib_env.sh``
installs it with ``--no-deps`` beside torch 2.13 (CPU) and runs this file. Without ``_C``,
``PuffeRL.train`` refuses to compute advantages; the trainer test puts a pure-torch
equivalent of that one kernel in its place. Skips without PufferLib.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest

from tests.extras import need

pytest.importorskip("pufferlib.emulation")
torch = need("torch")

import pufferlib.emulation  # noqa: E402 - after the skip
import pufferlib.pytorch  # noqa: E402
import pufferlib.vector  # noqa: E402

import butifarra_env  # noqa: E402
from butifarra_env import GYM_ID, butifarra_v0  # noqa: E402
from butifarra_env.core.actions import N_ACTIONS  # noqa: E402
from butifarra_env.core.observation import OBS_SIZE  # noqa: E402

butifarra_env.register_gymnasium_id()  # whatever imported gymnasium first

# The emulated observation is the dict's fields in key order: action_mask, then observation.
MASK = slice(0, N_ACTIONS)
OBS = slice(N_ACTIONS, N_ACTIONS + OBS_SIZE)


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks on a shared 2-core CPU
    yield
    torch.set_num_threads(threads)


def _gym_creator(buf: Any = None, seed: int = 0) -> pufferlib.emulation.GymnasiumPufferEnv:
    """What a PufferLib user writes; illegal moves raise instead of ending the hand."""
    return pufferlib.emulation.GymnasiumPufferEnv(
        env_creator=gymnasium.make,
        env_args=[GYM_ID],
        env_kwargs={"illegal_action": "raise", "reward_scale": 1 / 36},
        buf=buf,
        seed=seed,
    )


def _legal_actions(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniform legal action per row from the emulated mask (0 where the row's episode is
    over: the vector env resets it and ignores the action)."""
    mask = obs[:, MASK].view(np.int8) != 0
    pick = (rng.random(mask.shape) * mask).argmax(1)
    return np.where(mask.any(1), pick, 0)


def test_gymnasium_emulation_flattens_the_dict_and_nativizes_back() -> None:
    env = _gym_creator()
    assert env.single_observation_space.shape == (N_ACTIONS + OBS_SIZE,)
    assert env.single_action_space.n == N_ACTIONS
    flat, _ = env.reset(seed=3)
    native = pufferlib.pytorch.nativize_tensor(
        torch.as_tensor(flat), pufferlib.pytorch.nativize_dtype(env.emulated)
    )
    assert set(native) == {"action_mask", "observation"}
    inner = env.env  # the SingleAgentEnv itself
    assert np.array_equal(native["action_mask"].numpy()[0], inner.action_masks().astype(np.int8))
    assert np.array_equal(flat[0, MASK].view(np.int8), native["action_mask"].numpy()[0])
    assert np.array_equal(flat[0, OBS], native["observation"].numpy()[0])


def test_pettingzoo_emulation_of_the_parallel_view_plays_legal_moves() -> None:
    env = pufferlib.emulation.PettingZooPufferEnv(env_creator=butifarra_v0.parallel_env)
    assert env.num_agents == 4
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    hands = 0
    for _ in range(200):
        flat = np.stack([obs[a] for a in env.possible_agents])
        mask = flat[:, : N_ACTIONS + 1].view(np.int8) != 0  # Discrete(57): 56 is the no-op
        assert bool((mask.sum(1) >= 1).all()) and int(mask[:, :N_ACTIONS].any(1).sum()) == 1
        pick = (rng.random(mask.shape) * mask).argmax(1)
        obs, rewards, terms, truncs, _ = env.step(dict(zip(env.possible_agents, pick, strict=True)))
        if all(terms.values()):
            r = [rewards[a] for a in env.possible_agents]
            assert r[0] == r[2] == -r[1] == -r[3]  # zero-sum between the teams
            hands += 1
            obs, _ = env.reset()
    assert hands >= 2  # a hand is 49-58 steps


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_vector_env_steps_legal_actions_read_from_the_observation(backend: str) -> None:
    kwargs = {"num_workers": 2} if backend == "Multiprocessing" else {}
    vec = pufferlib.vector.make(
        _gym_creator, num_envs=4, backend=getattr(pufferlib.vector, backend), seed=0, **kwargs
    )
    try:
        obs, _ = vec.reset(seed=0)
        assert obs.shape == (4, N_ACTIONS + OBS_SIZE) and obs.dtype == np.uint8
        rng = np.random.default_rng(1)
        ends = 0
        for _ in range(120):  # a learner decides 12-15 times a hand
            obs, rewards, terms, _, _ = vec.step(_legal_actions(obs, rng))
            ends += int(terms.sum())
            assert bool((rewards[~terms] == 0).all())
        assert ends >= 4
    finally:
        vec.close()


class _MaskedPolicy(torch.nn.Module):
    """PufferLib's policy protocol (``forward_eval(obs, state) -> (logits, value)``), reading
    the mask from the emulated observation: illegal logits get -1e9 (probability 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(OBS_SIZE, 32), torch.nn.Tanh())
        self.logits = torch.nn.Linear(32, N_ACTIONS)
        self.value = torch.nn.Linear(32, 1)

    def forward_eval(self, observations: Any, state: Any = None) -> tuple[Any, Any]:
        hidden = self.body(observations[:, OBS].float() / 12.0)
        mask = observations[:, MASK].to(torch.int8) != 0
        logits = self.logits(hidden).masked_fill(~mask, -1e9)
        return logits, self.value(hidden)

    def forward(self, observations: Any, state: Any = None) -> tuple[Any, Any]:
        return self.forward_eval(observations, state)


def _puff_advantage_torch(
    values: Any,
    rewards: Any,
    terminals: Any,
    ratio: Any,
    advantages: Any,
    gamma: float,
    gae_lambda: float,
    vtrace_rho_clip: float,
    vtrace_c_clip: float,
) -> Any:
    """``torch.ops.pufferlib.compute_puff_advantage`` (GAE with V-trace clipping) in torch."""
    last = torch.zeros_like(values[:, 0])
    advantages.zero_()
    for t in reversed(range(values.shape[1] - 1)):
        not_done = 1.0 - terminals[:, t + 1]
        rho = ratio[:, t].clamp(max=vtrace_rho_clip)
        c = ratio[:, t].clamp(max=vtrace_c_clip)
        delta = rho * (rewards[:, t + 1] + gamma * values[:, t + 1] * not_done - values[:, t])
        last = delta + gamma * gae_lambda * c * last * not_done
        advantages[:, t] = last
    return advantages


def test_puffer_trainer_updates_a_masked_policy_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    pufferl = pytest.importorskip("pufferlib.pufferl")  # needs pyro-ppl, rich, rich-argparse
    if not pufferl._C_AVAILABLE:
        monkeypatch.setattr(pufferl, "compute_puff_advantage", _puff_advantage_torch)
    torch.manual_seed(0)
    vec = pufferlib.vector.make(_gym_creator, num_envs=4, backend=pufferlib.vector.Serial, seed=0)
    policy = _MaskedPolicy()
    before = [p.detach().clone() for p in policy.parameters()]
    config = {
        **dict(seed=0, device="cpu", cpu_offload=False, torch_deterministic=True),
        **dict(batch_size=256, bptt_horizon=16, minibatch_size=256, max_minibatch_size=256),
        **dict(total_timesteps=1024, update_epochs=2, learning_rate=1e-3, anneal_lr=False),
        **dict(optimizer="adam", adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-8),
        **dict(gamma=0.99, gae_lambda=0.95, clip_coef=0.2, vf_coef=0.5, vf_clip_coef=0.2),
        **dict(ent_coef=0.01, max_grad_norm=0.5, vtrace_rho_clip=1.0, vtrace_c_clip=1.0),
        **dict(prio_alpha=0.0, prio_beta0=1.0, precision="float32", use_rnn=False),
        **dict(compile=False, compile_fullgraph=False, compile_mode="default"),
        **dict(env="butifarra", data_dir=str(tmp_path), checkpoint_interval=10_000),
    }
    trainer = pufferl.PuffeRL(config, vec, policy)
    try:
        for _ in range(2):
            trainer.evaluate()  # illegal_action="raise": an illegal sample would raise here
            trainer.train()
        actions = trainer.actions.flatten()
        observations = trainer.observations.reshape(-1, N_ACTIONS + OBS_SIZE)
        live = observations[:, MASK].to(torch.int8).any(1)
        legal = observations[live, actions[live].long()].to(torch.int8)
        assert bool((legal == 1).all())  # every stored action was set in its mask
        assert trainer.global_step >= 512
        assert any(not torch.equal(b, p) for b, p in zip(before, policy.parameters(), strict=True))
    finally:
        vec.close()
