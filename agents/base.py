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
from butifarra_env.core.observation import OBS_SIZE, scale_vector

__all__ = ["Agent", "check_batch", "check_one"]


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


_FIELD_MAX = np.rint(1.0 / scale_vector().astype(np.float64)).astype(np.int64)
_SCALE = scale_vector()


def _canonical_observations(obs: np.ndarray) -> np.ndarray:
    """``uint8`` observations, from the ``uint8`` format or the documented ``float32`` one
    (``uint8_obs * scale_vector()``); anything else is refused, naming what was wrong."""
    kind = obs.dtype.kind
    if kind == "u" and obs.dtype.itemsize == 1:
        counts = obs
    elif kind in "iu":
        if obs.size and (obs.min() < 0 or obs.max() > 255):
            raise ValueError(
                "observations must hold the counts of butifarra_env.core.observation "
                f"(0-255), got values from {obs.min()} to {obs.max()}"
            )
        counts = obs.astype(np.uint8)
    elif kind == "f":
        if obs.size and not (np.isfinite(obs).all() and obs.min() >= 0.0 and obs.max() <= 1.0):
            raise ValueError(
                "float observations must be the obs_format='float32' ones, every entry in "
                "[0, 1] (uint8 observation * scale_vector())"
            )
        counts = np.rint(obs / _SCALE).astype(np.uint8)
        if not np.allclose(counts * _SCALE, obs, rtol=0.0, atol=1e-4):
            raise ValueError(
                "float observations must be uint8 observations * scale_vector() "
                "(obs_format='float32'); these are not"
            )
    else:
        raise ValueError(
            f"observations must be uint8 (or obs_format='float32'), got dtype {obs.dtype}"
        )
    over = counts > _FIELD_MAX
    if over.any():
        row, col = map(int, np.argwhere(over)[0])
        raise ValueError(
            f"observation row {row} entry {col} is {int(counts[row, col])}, above the most "
            f"that entry of butifarra_env.core.observation can hold ({int(_FIELD_MAX[col])}): "
            "not an observation of this environment"
        )
    return counts


def check_batch(
    observations: np.ndarray, action_masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The one check at the agent boundary: observations ``(N, 491)`` as ``uint8`` (the
    ``float32`` format is converted back) within the layout's ranges, and masks ``(N, 56)`` of
    0/1 with a legal action in every row. Raises ValueError naming what was wrong, so a wrong
    array fails loudly instead of being played blind."""
    obs = np.asarray(observations)
    masks = np.asarray(action_masks)
    if obs.ndim != 2 or obs.shape[1] != OBS_SIZE:
        raise ValueError(f"observations must have shape (N, {OBS_SIZE}), got {obs.shape}")
    if masks.shape != (obs.shape[0], N_ACTIONS):
        raise ValueError(
            f"action_masks must have shape ({obs.shape[0]}, {N_ACTIONS}), got {masks.shape}"
        )
    if masks.dtype.kind not in "biuf" or not ((masks == 0) | (masks == 1)).all():
        raise ValueError("action_masks must hold 0 and 1 only (1 = legal)")
    return _canonical_observations(obs), masks


def check_one(observation: np.ndarray, action_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`check_batch` for one observation ``(491,)`` and mask ``(56,)``."""
    obs = np.asarray(observation)
    mask = np.asarray(action_mask)
    if obs.shape != (OBS_SIZE,):
        raise ValueError(f"an observation must have shape ({OBS_SIZE},), got {obs.shape}")
    if mask.shape != (N_ACTIONS,):
        raise ValueError(f"an action mask must have shape ({N_ACTIONS},), got {mask.shape}")
    o, m = check_batch(obs[None], mask[None])
    return o[0], m[0]
