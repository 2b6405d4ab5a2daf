"""Uniformly random legal play: the floor every other agent is measured against."""

from __future__ import annotations

import numpy as np

from agents.base import Agent, check_batch


class RandomAgent(Agent):
    """Picks uniformly among the legal actions, from its own seeded generator."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        """A new generator from ``seed`` (None: fresh entropy)."""
        self.rng = np.random.default_rng(seed)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        legal = np.flatnonzero(action_mask)
        if len(legal) == 0:
            raise ValueError("no legal action in the mask")
        return int(legal[self.rng.integers(len(legal))])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        # argmax of uniform noise restricted to the legal ids is uniform over them.
        _, masks = check_batch(observations, action_masks)
        legal = masks != 0
        if not legal.any(axis=1).all():
            raise ValueError("some row of the action mask has no legal action")
        noise = self.rng.random(masks.shape)
        return np.where(legal, noise, -1.0).argmax(axis=1).astype(np.int64)
