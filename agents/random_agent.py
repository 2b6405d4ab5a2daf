"""Uniformly random legal play: the floor every other agent is measured against."""

from __future__ import annotations

import numpy as np

from agents.base import Agent, check_batch
from butifarra_env.actions import random_legal_actions


class RandomAgent(Agent):
    """Picks uniformly among the legal actions, from its own seeded generator."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        """A new generator from ``seed`` (None: fresh entropy)."""
        self.rng = np.random.default_rng(seed)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        # One integer draw per decision (cheaper than the batch's 56 uniforms); the stream
        # is part of the results for a seed, so it stays as it is.
        legal = np.flatnonzero(action_mask)
        if len(legal) == 0:
            raise ValueError("no legal action in the mask")
        return int(legal[self.rng.integers(len(legal))])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        _, masks = check_batch(observations, action_masks)
        return random_legal_actions(masks, self.rng)
