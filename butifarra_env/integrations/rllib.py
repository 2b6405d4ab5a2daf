"""Butifarra for Ray RLlib's new API stack: the observations RLlib's action-masking modules
expect, one hand per env or many hands per env.

RLlib's action-masking RLModules read ``{"observations": float32, "action_mask": float32}``
(``ray.rllib.examples.rl_modules.classes.action_masking_rlm``); PettingZoo gives
``{"observation": uint8, "action_mask": int8}``, so a bare ``PettingZooEnv`` fails with
``KeyError: 'observations'`` and then with a Byte/Float matmul. Two adapters fix that:

* :class:`PettingZooHandEnv`: ``butifarra_v0`` through RLlib's own ``PettingZooEnv``, keys
  renamed and cast; agents ``player_0`` … ``player_3``; one hand per episode. The plain
  path: any RLlib env runner, any connector.
* :class:`BatchedHandsEnv`: ``num_hands`` hands of :class:`~butifarra_env.envs.batched.BatchedEnv`
  in one ``MultiAgentEnv``, agent ids namespaced per hand slot (``h{slot}_player_{seat}``),
  so one env step asks the RLModule for one action per hand in one forward pass. An episode
  is one round of ``num_hands`` hands; each hand's four agents end with that hand.

The trainer's fast sampler for :class:`BatchedHandsEnv` (an env runner that steps the engine
itself and writes whole hands as episodes in bulk) is training machinery, not an adapter: it
is ``train.rllib_sampler.BatchedHandsEnvRunner``.

Observation values are raw (counts stay counts), float32 by default (``obs_dtype="uint8"``
keeps the engine's bytes, for models that cast, as ``agents.ppo_net.ActorCritic`` does): scale
inside the model. Rewards are the hand's team score difference times ``reward_scale``, at the
hand's end, for all four seats; the final observation of a hand is all zeros (nothing is
bootstrapped from a finished hand). Actions must be legal: the engine refuses the others, so
RLlib's env checker (which steps random actions) must be off.

Usage (a complete PPO config is ``train/rllib_ppo.py``)::

    from butifarra_env.integrations.rllib import BatchedHandsEnv, shared_policy_mapping
    config = (PPOConfig()
        .environment(BatchedHandsEnv, env_config={"num_hands": 64, "reward_scale": 1 / 36},
                     disable_env_checking=True)
        .multi_agent(policies={"shared"}, policy_mapping_fn=shared_policy_mapping,
                     count_steps_by="agent_steps"))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv
from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv
from ray.rllib.utils.typing import MultiAgentDict

from butifarra_env.butifarra_v0 import env as pettingzoo_env
from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.observation import OBS_SIZE, scale_vector
from butifarra_env.core.rules import N_SEATS
from butifarra_env.core.validate import check_int, check_reward_scale, check_seed
from butifarra_env.envs.batched import BatchedEnv

__all__ = [
    "MASK_KEY",
    "OBS_DTYPES",
    "OBS_KEY",
    "SHARED_POLICY",
    "BatchedHandsEnv",
    "PettingZooHandEnv",
    "agent_id",
    "observation_space",
    "parse_agent_id",
    "shared_policy_mapping",
]

OBS_KEY = "observations"
"""The observation vector's key, as RLlib's action-masking modules read it."""
MASK_KEY = "action_mask"
"""The legal-action mask's key (1.0 legal, 0.0 illegal)."""
SHARED_POLICY = "shared"
"""The module id every seat maps to under :func:`shared_policy_mapping`."""
_OBS_HIGH = np.rint(1.0 / scale_vector())  # each entry's largest value
_ENV_KEYS = ("num_hands", "seed", "reward_scale", "obs_dtype")


OBS_DTYPES = ("float32", "uint8")
"""``float32`` (what RLlib's action-masking modules need) or ``uint8`` (the engine's bytes,
4x smaller episodes, for models that cast their input, as ``ActorCritic`` does)."""


def observation_space(dtype: str = "float32") -> gym.spaces.Dict:
    """The per-agent observation space of every adapter here."""
    if dtype not in OBS_DTYPES:
        raise ValueError(f"obs_dtype must be one of {list(OBS_DTYPES)}, got {dtype!r}")
    kind = np.float32 if dtype == "float32" else np.uint8
    return gym.spaces.Dict(
        {
            OBS_KEY: gym.spaces.Box(np.zeros(OBS_SIZE, kind), _OBS_HIGH.astype(kind), None, kind),
            MASK_KEY: gym.spaces.Box(0, 1, (N_ACTIONS,), kind),
        }
    )


def agent_id(slot: int, seat: int) -> str:
    """The agent id of ``seat`` in hand slot ``slot`` of a :class:`BatchedHandsEnv`."""
    return f"h{slot}_player_{seat}"


def parse_agent_id(agent: object) -> tuple[int, int]:
    """``(slot, seat)`` of an agent id: ``h{slot}_player_{seat}``, or ``player_{seat}`` (slot
    0). ValueError for anything else."""
    text = str(agent)
    head, sep, seat = text.rpartition("player_")
    slot = head[1:-1] if head.startswith("h") and head.endswith("_") else None
    ok = sep and seat.isdigit() and int(seat) < N_SEATS and (head == "" or slot is not None)
    if not ok or (slot is not None and not slot.isdigit()):
        raise ValueError(
            f"not a Butifarra agent id: {agent!r} (expected 'player_S' or 'hN_player_S')"
        )
    return (int(slot) if slot else 0), int(seat)


def shared_policy_mapping(agent: Any, episode: Any = None, **kwargs: Any) -> str:
    """Every seat of every hand plays the one shared policy (self-play)."""
    return SHARED_POLICY


def _env_options(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """``butifarra_v0`` options from an RLlib ``env_config`` (an ``EnvContext`` is a dict
    whose worker fields are attributes, not keys)."""
    return {k: v for k, v in dict(config or {}).items() if k not in _ENV_KEYS}


def _convert(obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {
        OBS_KEY: np.asarray(obs["observation"], dtype=np.float32),
        MASK_KEY: np.asarray(obs["action_mask"], dtype=np.float32),
    }


class PettingZooHandEnv(PettingZooEnv):
    """``butifarra_v0`` (one hand per episode) as RLlib's ``PettingZooEnv``, with the
    observation keys and dtypes of RLlib's action-masking modules.

    ``config`` (RLlib's ``env_config``): ``reward_scale`` and the ``butifarra_v0`` options
    (``max_doubling_level``...); ``seed`` seeds the first reset. Rewards arrive at the
    hand's end, for all four seats.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        cfg = dict(config or {})
        self._first_seed = check_seed(cfg.get("seed"))
        options = _env_options(cfg)
        options["reward_scale"] = check_reward_scale(cfg.get("reward_scale", 1.0))
        super().__init__(pettingzoo_env(**options))
        space = observation_space()
        self.observation_spaces = {a: space for a in self._agent_ids}
        self.observation_space = gym.spaces.Dict({str(a): space for a in self._agent_ids})

    def reset(  # type: ignore[override]  # RLlib's multi-agent reset is not gymnasium's
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        if seed is None and self._first_seed is not None:
            seed, self._first_seed = self._first_seed, None
        obs, infos = super().reset(seed=seed, options=options)
        return {a: _convert(o) for a, o in obs.items()}, infos

    def step(  # type: ignore[override]  # RLlib's multi-agent step is not gymnasium's
        self, action: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        obs, rewards, terminateds, truncateds, infos = super().step(action)
        return {a: _convert(o) for a, o in obs.items()}, rewards, terminateds, truncateds, infos


class BatchedHandsEnv(MultiAgentEnv):
    """``num_hands`` Butifarra hands per env on the batched engine, one agent per (slot, seat).

    ``config`` (RLlib's ``env_config``): ``num_hands`` (default 16), ``seed`` (None),
    ``reward_scale`` (1.0), ``obs_dtype`` (:data:`OBS_DTYPES`, default ``"float32"``) and
    the ``butifarra_v0`` options (``max_doubling_level``,
    ``butifarra_base``, ``first_dealer``; ``target_score`` must stay None: an episode holds
    one hand per slot). Everything is checked here, before RLlib starts sampling.

    Each step returns the observation of the seat to move in every hand still playing (and a
    0.0 reward with it, as RLlib requires); a hand's end gives its four agents their reward,
    ``terminated=True`` and an all-zero final observation. The episode ends with its last
    hand; hands that ended earlier wait, stepped by the engine with a legal dummy action that
    nobody sees. ``train.rllib_sampler.BatchedHandsEnvRunner`` samples this env without
    those waits.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        cfg = dict(config or {})
        n = check_int("num_hands", cfg.get("num_hands", 16), 1)
        seed = check_seed(cfg.get("seed"))
        scale = check_reward_scale(cfg.get("reward_scale", 1.0))
        options = _env_options(cfg)
        if options.get("target_score") is not None:
            raise ValueError(
                f"target_score must be None for BatchedHandsEnv (one hand per slot and "
                f"episode), got {options['target_score']!r}"
            )
        options.pop("render_mode", None)
        space = observation_space(cfg.get("obs_dtype", "float32"))
        self.obs_dtype = space[OBS_KEY].dtype
        self.num_hands = n
        self.reward_scale = scale
        self.engine = BatchedEnv(n, seed=seed, reward_scale=scale, **options)
        self.agent_ids = np.array([[agent_id(h, s) for s in range(N_SEATS)] for h in range(n)])
        names: list[str] = self.agent_ids.reshape(-1).tolist()
        self.possible_agents = list(names)
        self.agents = list(names)
        self.agent_observation_space = space
        self.agent_action_space: gym.Space = gym.spaces.Discrete(N_ACTIONS)
        self.observation_spaces = {a: space for a in names}
        self.action_spaces = {a: self.agent_action_space for a in names}
        self.observation_space = gym.spaces.Dict({a: space for a in names})
        self.action_space = gym.spaces.Dict({a: self.agent_action_space for a in names})
        self._live = np.ones(n, dtype=bool)
        self._seat = np.zeros(n, dtype=np.int64)
        self._mask = np.zeros((n, N_ACTIONS), dtype=np.int8)
        self._final = {OBS_KEY: np.zeros(OBS_SIZE, self.obs_dtype)}
        self._final[MASK_KEY] = np.zeros(N_ACTIONS, self.obs_dtype)

    def reset(  # type: ignore[override]  # RLlib's multi-agent reset is not gymnasium's
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        obs, mask, seat = self.engine.reset(seed=check_seed(seed))
        self._live[:] = True
        self.agents = list(self.possible_agents)
        return self._observe(np.arange(self.num_hands), obs, mask, seat), {}

    def step(  # type: ignore[override]  # RLlib's multi-agent step is not gymnasium's
        self, action_dict: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        actions = self._mask.argmax(axis=1)  # a legal dummy for hands that already ended
        live = np.flatnonzero(self._live)
        for hand, aid in zip(live.tolist(), self.agent_ids[live, self._seat[live]], strict=True):
            actions[hand] = action_dict[aid]
        obs, mask, seat, rewards, done = self.engine.step(actions)
        ended = np.flatnonzero(done & self._live)
        self._live &= ~done
        playing = np.flatnonzero(self._live)
        out = self._observe(playing, obs, mask, seat)
        reward: MultiAgentDict = dict.fromkeys(out, 0.0)  # RLlib wants one with every obs
        terminateds: MultiAgentDict = {}
        for hand, row in zip(ended.tolist(), rewards[ended].tolist(), strict=True):
            for s, aid in enumerate(self.agent_ids[hand].tolist()):
                out[aid] = self._final
                reward[aid] = row[s]
                terminateds[aid] = True
        terminateds["__all__"] = not playing.size
        if not playing.size:
            self.agents = []
        return out, reward, terminateds, {"__all__": False}, {}

    def _observe(
        self, hands: np.ndarray, obs: np.ndarray, mask: np.ndarray, seat: np.ndarray
    ) -> MultiAgentDict:
        self._seat, self._mask = seat, mask
        o = obs[hands].astype(self.obs_dtype)
        m = mask[hands].astype(self.obs_dtype)
        ids = self.agent_ids[hands, seat[hands]].tolist()
        return {a: {OBS_KEY: o[i], MASK_KEY: m[i]} for i, a in enumerate(ids)}
