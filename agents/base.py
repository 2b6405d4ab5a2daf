"""The one interface every agent implements: :class:`Agent`, and :func:`check_batch`.

An agent sees exactly what a player sees: the observation vector of its seat
(:data:`butifarra_env.core.observation.OBS_SIZE` ``uint8`` values) and the action mask
(``int8`` of 56). It never gets the :class:`~butifarra_env.core.game.Game`, so the arena,
the environment and PPO self-play can all drive any agent the same way.

``Agent`` is a :class:`butifarra_env.core.policy.Policy` and a
:class:`~butifarra_env.core.policy.BatchPolicy` (the types the environments accept), plus a
``name`` and a ``reset(seed)`` hook. Building agents by name is :mod:`agents.registry`.
"""

from __future__ import annotations

import abc

import numpy as np

from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.observation import OBS_SIZE

__all__ = ["Agent", "check_batch"]


class Agent(abc.ABC):
    """A player: observation + legal-action mask in, action id out."""

    name: str = "agent"

    @abc.abstractmethod
    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        """One legal action id for one observation (``uint8`` (491,)) and mask (``int8`` (56,))."""

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """Actions for a batch (``(N, 491)``, ``(N, 56)``) as ``int64`` ``(N,)``.

        The default loops over :meth:`act`; agents with a vectorised policy override it.
        """
        obs, masks = check_batch(observations, action_masks)
        return np.fromiter(
            (self.act(obs[i], masks[i]) for i in range(len(obs))), dtype=np.int64, count=len(obs)
        )

    def action_probs_batch(
        self, observations: np.ndarray, action_masks: np.ndarray
    ) -> np.ndarray | None:
        """The policy's probabilities over the 56 actions for a batch (``float`` ``(N, 56)``,
        0 on illegal actions, rows summing to 1), or None for an agent without a policy
        distribution (the default). Optional; the arena logs them with ``records_path``.

        It must not change the agent's state (no random draws), so that asking for the
        probabilities never changes what the agent plays.
        """
        return None

    def reset(self, seed: int | None = None) -> None:  # noqa: B027 - optional hook
        """Reseed (and forget any per-hand state); deterministic agents ignore it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def check_batch(
    observations: np.ndarray, action_masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Validate batch shapes once, so a wrong array fails loudly instead of acting on garbage."""
    obs = np.asarray(observations)
    masks = np.asarray(action_masks)
    if obs.ndim != 2 or obs.shape[1] != OBS_SIZE:
        raise ValueError(f"observations must have shape (N, {OBS_SIZE}), got {obs.shape}")
    if masks.shape != (obs.shape[0], N_ACTIONS):
        raise ValueError(
            f"action_masks must have shape ({obs.shape[0]}, {N_ACTIONS}), got {masks.shape}"
        )
    return obs, masks
