"""Uniformly random legal play: the floor every other agent is measured against."""

from __future__ import annotations

import numpy as np

from agents.base import Agent, check_batch, check_one
from butifarra_env.core.actions import random_legal_actions
from butifarra_env.core.validate import check_seed


class RandomAgent(Agent):
    """Picks uniformly among the legal actions, from its own seeded generator."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(check_seed(seed))

    def reset(self, seed: int | None = None) -> None:
        """A new generator from ``seed`` (None: fresh entropy; anything else but an int >= 0
        is refused, naming ``seed``)."""
        self.rng = np.random.default_rng(check_seed(seed))

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        # One integer draw per decision (cheaper than the batch's 56 uniforms); the stream
        # is part of the results for a seed, so it stays as it is.
        _, action_mask = check_one(observation, action_mask, self.obs_version)
        legal = np.flatnonzero(action_mask)
        if len(legal) == 0:
            raise ValueError("no legal action in the mask")
        return int(legal[self.rng.integers(len(legal))])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        _, masks = check_batch(observations, action_masks, self.obs_version)
        return random_legal_actions(masks, self.rng)

    def action_probs_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """Uniform over each row's legal actions (no draw: the generator is untouched)."""
        _, masks = check_batch(observations, action_masks, self.obs_version)
        legal = (masks != 0).astype(np.float64)
        counts = legal.sum(axis=1, keepdims=True)
        if not counts.all():
            raise ValueError("some row of the action mask has no legal action")
        return legal / counts
