"""A PettingZoo Parallel view of ``butifarra_v0`` (and ``butifarra_v1``: the same view over the
v1 observation, ``obs_version=1``): every agent acts at every step.

Tools that want a ``ParallelEnv`` (SuperSuit's vectorisers, PufferLib, AgileRL's vector envs,
PettingZoo's own parallel tests) need every agent to submit an action at every step and a
legal action for each of them to choose. Butifarra is turn-based, so here the seat to move has
its legal actions (ids 0-55, exactly those of the AEC env) and the three others have one
explicit no-op, :data:`NOOP_ACTION` (56): the action space is ``Discrete(57)`` and the
observation's ``action_mask`` has 57 entries, the no-op's last. One parallel step is one move,
so the view is held equal to the AEC env move for move (``tests/test_parallel_env.py``).

Illegal actions follow ``butifarra_v0.env()``'s convention: the episode ends and each agent
that sent an illegal action (the mover outside its legal set, a waiting agent anything but the
no-op) receives minus the worst hand loss (times ``reward_scale``), with
``infos[agent]["illegal_action"]``. ``action_space(agent).sample()`` with no mask draws one of
the agent's current legal actions, so an unmasked random player still plays the game.
``max_cycles`` truncates the episode after that many steps (None: never).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.validate import check_int, is_int
from butifarra_env.envs.aec import AGENTS, raw_env

__all__ = ["NOOP_ACTION", "N_PARALLEL_ACTIONS", "ButifarraParallelEnv", "parallel_env"]

NOOP_ACTION = N_ACTIONS
"""The waiting agents' only action (56): one past the AEC env's ids, which are unchanged."""
N_PARALLEL_ACTIONS = N_ACTIONS + 1


class _LegalSampling(spaces.Discrete):
    """``Discrete(57)`` whose ``sample()`` without a mask draws from its agent's legal actions
    now (with a mask or probabilities it is Gymnasium's own sample)."""

    def __init__(self, env: ButifarraParallelEnv, agent: str) -> None:
        super().__init__(N_PARALLEL_ACTIONS)
        self._env = env
        self._agent = agent

    def sample(self, mask: Any = None, probability: Any = None) -> np.int64:
        if mask is None and probability is None:
            mask = self._env._mask(self._agent)
        return super().sample(mask=mask, probability=probability)


class ButifarraParallelEnv(ParallelEnv):
    """The Parallel view (see the module docstring); options (``obs_version`` included) as
    ``raw_env``; ``metadata["name"]`` is the AEC env's name plus ``_parallel``."""

    metadata = {
        "name": "butifarra_v0_parallel",
        "render_modes": ["human", "ansi", "rgb_array"],
        "is_parallelizable": True,
    }

    def __init__(self, max_cycles: int | None = None, **kwargs: Any) -> None:
        self.max_cycles = check_int("max_cycles", max_cycles, 1, none_ok=True)
        self.aec = raw_env(**kwargs)
        self.metadata = {**type(self).metadata, "name": f"{self.aec.metadata['name']}_parallel"}
        self.render_mode = self.aec.render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.state_space = self.aec.state_space
        self._penalty = -self.aec.game_options.worst_hand_loss * self.aec.reward_scale
        self._steps = 0
        self._over = True

    # ------------------------------------------------------------------ spaces
    @functools.cache  # noqa: B019 - one space object per agent, as PettingZoo asks
    def observation_space(self, agent: str) -> spaces.Space:
        inner = self.aec.observation_space(agent)
        assert isinstance(inner, spaces.Dict)
        return spaces.Dict(
            {
                "observation": inner["observation"],
                "action_mask": spaces.Box(0, 1, (N_PARALLEL_ACTIONS,), np.int8),
            }
        )

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Space:
        return _LegalSampling(self, agent)

    # ------------------------------------------------------------------ episode
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """As ``raw_env.reset`` (same seed, same deals; the same ``options``)."""
        self.aec.reset(seed=seed, options=options)
        if seed is not None:
            for k, agent in enumerate(self.possible_agents):
                self.action_space(agent).seed(seed + 1 + k)
        self.agents = list(self.possible_agents)
        self._steps = 0
        self._over = False
        return self._observations(), self._infos()

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]:
        """One move: the mover's action from ``actions``, the no-op from every other agent."""
        if self._over:
            raise RuntimeError(
                f"{self.aec.metadata['name']} parallel: call reset() (the episode is over)"
            )
        mover = self.aec.agent_selection
        chosen = self._check_actions(actions, mover)
        legal = self._mask(mover)
        illegal = [a for a in self.agents if not legal_for(a == mover, legal, chosen[a])]
        infos = self._infos()
        if illegal:
            rewards = {a: (self._penalty if a in illegal else 0.0) for a in self.agents}
            for a in illegal:
                infos[a]["illegal_action"] = chosen[a]
            return self._end(rewards, infos, truncated=False)
        self.aec.step(chosen[mover])
        self._steps += 1
        rewards = {a: float(self.aec.rewards[a]) for a in self.agents}
        infos = self._infos()
        if any(self.aec.terminations.values()):
            return self._end(rewards, infos, truncated=False)
        if self.max_cycles is not None and self._steps >= self.max_cycles:
            return self._end(rewards, infos, truncated=True)
        no = dict.fromkeys(self.agents, False)
        return self._observations(), rewards, no, dict(no), infos

    def _check_actions(self, actions: Mapping[str, Any], mover: str) -> dict[str, int]:
        if not isinstance(actions, Mapping):
            raise ValueError(
                f"actions must be a dict agent -> action, got {type(actions).__name__}"
            )
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for unknown agent(s) {sorted(unknown)}; live: {self.agents}")
        if mover not in actions:
            raise ValueError(f"{mover} is to move: actions must include its action")
        chosen = {}
        for agent in self.agents:
            a = actions.get(agent, NOOP_ACTION)
            if isinstance(a, np.ndarray) and a.ndim == 0:
                a = a.item()
            if not is_int(a) or not 0 <= a <= NOOP_ACTION:
                raise ValueError(
                    f"the action of {agent} must be an int 0-{NOOP_ACTION} "
                    f"({NOOP_ACTION}: no-op), got {a!r}"
                )
            chosen[agent] = int(a)
        return chosen

    def _end(
        self, rewards: dict[str, float], infos: dict[str, Any], truncated: bool
    ) -> tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]]:
        self._over = True  # terminal observations and infos: no legal action for anyone
        obs = self._observations()
        for info in infos.values():
            info["action_mask"] = np.zeros(N_PARALLEL_ACTIONS, np.int8)
        done = dict.fromkeys(self.agents, True)
        off = dict.fromkeys(self.agents, False)
        self.agents = []
        return obs, rewards, (off if truncated else done), (done if truncated else off), infos

    # ------------------------------------------------------------------ views
    def _mask(self, agent: str) -> np.ndarray:
        """The 57-entry mask: the AEC mask for the mover, the no-op for the others."""
        mask = np.zeros(N_PARALLEL_ACTIONS, np.int8)
        if self._over or agent not in self.agents:
            return mask
        if agent == self.aec.agent_selection:
            mask[:N_ACTIONS] = self.aec.observe(agent)["action_mask"]
        else:
            mask[NOOP_ACTION] = 1
        return mask

    def _observations(self) -> dict[str, Any]:
        out = {}
        for agent in self.possible_agents if self.agents else []:
            obs = self.aec.observe(agent)
            out[agent] = {"observation": obs["observation"], "action_mask": self._mask(agent)}
        return out

    def _infos(self) -> dict[str, Any]:
        return {a: {"action_mask": self._mask(a)} for a in self.agents}

    def state(self) -> np.ndarray:
        return self.aec.state()

    def render(self) -> Any:
        return self.aec.render()

    def close(self) -> None:
        self.aec.close()

    @property
    def game(self) -> Any:
        """The hand being played (:class:`~butifarra_env.core.game.Game`)."""
        return self.aec.game


def legal_for(is_mover: bool, mover_mask: np.ndarray, action: int) -> bool:
    """Whether ``action`` is legal: in the mover's mask, or the no-op for a waiting agent."""
    return bool(mover_mask[action]) if is_mover else action == NOOP_ACTION


def parallel_env(**kwargs: Any) -> ButifarraParallelEnv:
    """The Parallel view; ``max_cycles`` plus the options of ``raw_env`` (``obs_version``:
    ``butifarra_v1.parallel_env`` passes 1)."""
    return ButifarraParallelEnv(**kwargs)
