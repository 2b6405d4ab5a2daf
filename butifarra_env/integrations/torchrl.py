"""Butifarra for TorchRL: a native batched ``EnvBase`` over :class:`BatchedEnv`, and the
self-play returns its single-policy training needs.

TorchRL's own wrappers already work on the other views, with nothing from this module:

* ``GymEnv("butifarra_env/Butifarra-v0", categorical_action_encoding=True)`` (one learner
  seat, the others played by given policies), with the ``ActionMask`` transform: the observation
  dict's ``action_mask`` becomes the tensordict key ``"action_mask"``;
* ``PettingZooWrapper(butifarra_v0.env(), use_mask=True, categorical_actions=True)`` (the AEC
  env: one group per seat, ``(seat, "action_mask")`` and ``(seat, "mask")``, who acted) or
  ``PettingZooWrapper(butifarra_v0.parallel_env(), categorical_actions=True)`` (group
  ``"player"`` of 4; Discrete(57), 56 is the waiting seats' no-op).

:class:`ButifarraEnv` is the fast path: ``num_envs`` hands of the numpy engine in one
``EnvBase`` with ``batch_size=(num_envs,)``, one decision per hand per step (the seat to move's,
so one shared policy plays all four seats: self-play). Its keys, all of batch shape ``(N,)``:

========================  ==========================  =====================================
key                       spec                        meaning
========================  ==========================  =====================================
``"observation"``         float32 (N, 491) in [0, 1]  the mover's view (``obs_format``)
``"action_mask"``         bool (N, 56)                the mover's legal actions
``"seat"``                Categorical(4)              the seat to move (0-3)
``"seat_rewards"``        float32 (N, 4)              this step's rewards of all four seats
``"action"``              Categorical(56), masked     the mover's action id
``"reward"``              float32 (N, 1)              the reward of the seat that acted
``"done"``/``"terminated"``  bool (N, 1)              the episode (hand or match) ended
========================  ==========================  =====================================

The action spec's mask is kept up to date by the env itself, so ``env.rand_step()`` and
``check_env_specs`` play legal moves; the ``ActionMask`` transform does the same (and is
harmless on top). A policy samples with ``MaskedCategorical`` (``in_keys={"logits": ...,
"mask": "action_mask"}``).

Episode ends follow TorchRL's conventions: on the step that ends a hand, ``("next", ...)``
holds the final position as the seat that acted sees it (an all-False mask: no move is left)
and ``done`` is True; the next hand (dealt by the engine at once) is what ``reset`` returns
for that env, which ``step_and_maybe_reset`` (collectors, ``rollout(break_when_any_done=False)``)
calls with a ``"_reset"`` mask. A full ``reset()`` (no ``"_reset"``) deals every hand anew.
Only finished envs can be reset one by one (the engine deals all or none): a ``"_reset"`` that
names a running env raises ValueError.

``"reward"`` is the acting seat's reward, and the seat changes every step, so TorchRL's value
estimators (GAE, TD(λ)), which chain one agent's rewards through the next state's value, do
not apply across seats. :func:`mover_returns` gives each decision the return of the seat that
took it (its team's score difference at the episode's end, optionally discounted); use it as
``"value_target"`` and, less a baseline, as ``"advantage"``: TorchRL's PPO losses take both
keys as given. ``tests/integrations/test_torchrl.py`` trains that way with a ``Collector`` and
``ClipPPOLoss``.

Usage::

    from butifarra_env.integrations.torchrl import ButifarraEnv, mover_returns
    env = ButifarraEnv(num_envs=256, seed=0, reward_scale=1 / 36)     # device="cpu"
    check_env_specs(env)
    batch = env.rollout(64, policy, break_when_any_done=False)       # (256, 64)
    returns, valid = mover_returns(batch)

Tested with torchrl 0.13.3 / tensordict 0.13.0 (the pair that shares AgileRL's pin); torchrl's
compiled extension (prioritized replay's segment trees) does not load against torch builds
newer than the one it was built for, and nothing here needs it.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase  # type: ignore[import-untyped,import-not-found,unused-ignore]
from torchrl.data import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    Binary,
    Bounded,
    Categorical,
    Composite,
    Unbounded,
)
from torchrl.envs import EnvBase  # type: ignore[import-untyped,import-not-found,unused-ignore]

from butifarra_env import register_gymnasium_id
from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.observation import OBS_SIZE
from butifarra_env.core.rules import N_SEATS
from butifarra_env.core.validate import check_int, check_obs_format, check_seed
from butifarra_env.envs.batched import BatchedEnv

__all__ = ["ButifarraEnv", "mover_returns"]

# ``GymEnv("butifarra_env/Butifarra-v0")`` works whatever the import order once this module is
# loaded (the lazy registration misses a ``gymnasium`` that was only probed with find_spec).
register_gymnasium_id()


class ButifarraEnv(EnvBase):
    """``num_envs`` Butifarra hands of :class:`BatchedEnv` as one batched TorchRL env.

    ``seed`` seeds the deals (``set_seed`` reseeds them from the next full ``reset``);
    ``device`` is where every tensor lives (the engine computes on the CPU; on CPU its arrays
    are shared, not copied); ``obs_format`` is ``"float32"`` (default: scaled to [0, 1]) or
    ``"uint8"`` (the engine's bytes); ``reward_scale`` multiplies all rewards (``1/36`` puts a
    typical hand near +-1); other keywords are the game options of ``butifarra_v0``
    (``max_doubling_level``, ``target_score``, ...: a match per episode with the latter).
    """

    batch_locked = True

    def __init__(
        self,
        num_envs: int = 1,
        seed: int | None = None,
        *,
        device: str | torch.device = "cpu",
        obs_format: str = "float32",
        reward_scale: float = 1.0,
        **options: Any,
    ) -> None:
        n = check_int("num_envs", num_envs, 1)
        self.obs_format = check_obs_format(obs_format)
        super().__init__(device=device, batch_size=torch.Size([n]))
        self.num_envs = n
        self.engine = BatchedEnv(
            n,
            check_seed(seed),
            device=str(self.device),
            reward_scale=reward_scale,
            obs_format=self.obs_format,
            keep_final_obs=True,
            **options,
        )
        self._next_seed: int | None = None
        self._fresh = torch.zeros(n, dtype=torch.bool, device=self.device)
        self._current: dict[str, Any] | None = None  # the decision every env is at
        self._make_specs()

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        n, dev = self.num_envs, self.device
        if self.obs_format == "float32":
            obs_spec: Any = Bounded(0.0, 1.0, shape=(n, OBS_SIZE), dtype=torch.float32, device=dev)
        else:
            obs_spec = Bounded(0, 255, shape=(n, OBS_SIZE), dtype=torch.uint8, device=dev)
        self.observation_spec = Composite(
            observation=obs_spec,
            action_mask=Binary(n=N_ACTIONS, shape=(n, N_ACTIONS), dtype=torch.bool, device=dev),
            seat=Categorical(N_SEATS, shape=(n,), dtype=torch.int64, device=dev),
            seat_rewards=Unbounded(shape=(n, N_SEATS), dtype=torch.float32, device=dev),
            shape=(n,),
            device=dev,
        )
        self.action_spec = Categorical(N_ACTIONS, shape=(n,), dtype=torch.int64, device=dev)
        self.reward_spec = Unbounded(shape=(n, 1), dtype=torch.float32, device=dev)
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool, device=dev)
        self.done_spec = Composite(
            done=flag.clone(),
            terminated=flag.clone(),
            truncated=flag.clone(),
            shape=(n,),
            device=dev,
        )

    # ------------------------------------------------------------------ EnvBase
    def _set_seed(self, seed: int | None) -> None:
        self._next_seed = check_seed(seed)

    def _decision(self, obs: Any, mask: Any, seat: Any, seat_rewards: Any) -> dict[str, Any]:
        mask_b = mask.to(torch.bool)
        self.action_spec.update_mask(mask_b)
        return {
            "observation": obs,
            "action_mask": mask_b,
            "seat": seat,
            "seat_rewards": seat_rewards,
        }

    def _out(self, values: dict[str, Any], done: Any = None) -> TensorDict:
        # Every tensor comes fresh from the engine each step: shared, never cloned.
        if done is None:
            done = torch.zeros((self.num_envs, 1), dtype=torch.bool, device=self.device)
        values = {**values, "done": done, "terminated": done.clone()}
        values["truncated"] = torch.zeros_like(done)
        return TensorDict(values, batch_size=self.batch_size, device=self.device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        partial = None if tensordict is None else tensordict.get("_reset", None)
        if partial is not None and self._current is not None:
            partial = partial.reshape(self.num_envs).to(self.device)
            stale = partial & ~self._fresh
            if bool(stale.any()):
                raise ValueError(
                    "ButifarraEnv resets envs one by one only once their episode is done "
                    f"(the engine deals all hands or none); envs {stale.nonzero().flatten()} "
                    "are still playing. Call reset() without '_reset' to deal every hand anew."
                )
            self.action_spec.update_mask(self._current["action_mask"])
            rewards = self._current["seat_rewards"]
            zeroed = torch.where(partial.unsqueeze(1), torch.zeros_like(rewards), rewards)
            return self._out({**self._current, "seat_rewards": zeroed})
        obs, mask, seat = self.engine.reset(self._next_seed)
        self._next_seed = None
        zeros = torch.zeros((self.num_envs, N_SEATS), dtype=torch.float32, device=self.device)
        self._current = self._decision(obs, mask, seat, zeros)
        self._fresh.fill_(True)
        return self._out(self._current)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._current is None:
            raise RuntimeError("ButifarraEnv: call reset() before step()")
        action = tensordict.get("action").reshape(self.num_envs)
        acting = self._current["seat"]
        obs, mask, seat, rewards, done = self.engine.step(action.to(self.device))
        done = done.to(torch.bool)
        self._current = self._decision(obs, mask, seat, rewards)
        self._fresh = done.clone()
        reward = rewards.gather(1, acting.unsqueeze(1))
        if not bool(done.any()):
            return self._out({**self._current, "reward": reward})
        # The final position of every finished episode, seen by the seat that acted.
        ids_np, views = self.engine.final_observations()
        ids = torch.as_tensor(ids_np, device=self.device)
        next_obs = obs.clone()
        next_obs[ids] = views[torch.arange(len(ids), device=self.device), acting[ids]]
        next_mask = self._current["action_mask"].clone()
        next_mask[ids] = False
        next_seat = seat.clone()
        next_seat[ids] = acting[ids]
        return self._out(
            {
                "observation": next_obs,
                "action_mask": next_mask,
                "seat": next_seat,
                "seat_rewards": rewards,
                "reward": reward,
            },
            done.unsqueeze(1),
        )


def mover_returns(batch: TensorDictBase, gamma: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(returns, valid)`` for a rollout or collector batch of :class:`ButifarraEnv`,
    shaped ``(..., T)`` (time last, as ``rollout`` and collectors give it).

    ``returns[..., t]`` is what the seat that acted at ``t`` (``batch["seat"]``) received from
    ``t`` to the end of its episode, each later step's ``("next", "seat_rewards")`` discounted
    by ``gamma`` per decision (any seat's); ``valid`` is False where the episode had not ended
    by the batch's last step (that return is incomplete: leave it out of the loss).
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    seat_rewards = batch.get(("next", "seat_rewards"))
    done = batch.get(("next", "done")).squeeze(-1)
    seat = batch.get("seat")
    t_len = seat.shape[-1]
    carry = torch.zeros_like(seat_rewards[..., 0, :])
    ended = torch.zeros_like(done[..., 0])
    returns = torch.empty_like(seat, dtype=seat_rewards.dtype)
    valid = torch.empty_like(done)
    for t in reversed(range(t_len)):
        d = done[..., t]
        carry = seat_rewards[..., t, :] + gamma * carry * (~d).unsqueeze(-1)
        ended = ended | d
        returns[..., t] = carry.gather(-1, seat[..., t].unsqueeze(-1)).squeeze(-1)
        valid[..., t] = ended
    return returns, valid
