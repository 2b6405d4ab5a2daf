"""A trained PPO policy behind the common :class:`~agents.base.Agent` interface.

The network and its checkpoint format are :mod:`agents.ppo_net` (``train/ppo.py`` trains
them; nothing here imports the training code). A checkpoint holds only tensors and plain
containers (state_dict, arch dict, config dict), so it loads with
``torch.load(..., weights_only=True)``: no pickled code runs on load. It is verified before
the network is built (:func:`~agents.ppo_net.load_checkpoint`: weight shapes against the
architecture, finite weights, fingerprint); a file that fails is a ValueError naming it.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from agents.base import VARIANTS, Agent, check_batch, trained_variants
from agents.ppo_net import ActorCritic, load_checkpoint, masked_logits, model_from_checkpoint


class PPOAgent(Agent):
    """Plays the policy of a train/ppo.py checkpoint: argmax of the legal logits by default,
    or a sample from the masked policy with ``deterministic=False``."""

    name = "ppo"
    checkpoint_path: str | None
    """The file the policy came from (None for :meth:`from_model`)."""
    info: dict[str, int | float]
    """Training counters stored in the checkpoint (update, global_step, elapsed_s), if any."""
    supported_variants: frozenset[str] = frozenset()
    """A policy plays the rules it was trained under: the variants its checkpoint's training
    config names (:func:`agents.base.trained_variants`; none for the shipped ones, nor for
    :meth:`from_model`); every one with ``allow_variants``."""
    trained_variants: frozenset[str] = frozenset()
    variants_hint = (
        "the policy was trained under the default rules; seat rule or search:bidding=rule, "
        "or play it anyway with allow_variants=True (the spec ppo:allow_variants)"
    )

    def __init__(
        self,
        checkpoint_path: str | os.PathLike[str],
        device: str = "cpu",
        deterministic: bool = True,
        seed: int | None = None,
        allow_variants: bool = False,
    ) -> None:
        data = load_checkpoint(checkpoint_path)
        self.checkpoint_path = str(checkpoint_path)
        self.info = {k: data[k] for k in ("update", "global_step", "elapsed_s") if k in data}
        config = data.get("config")
        self.trained_variants = trained_variants(config if isinstance(config, dict) else None)
        self.supported_variants = VARIANTS if allow_variants else self.trained_variants
        self._setup(model_from_checkpoint(data, checkpoint_path), device, deterministic, seed)

    @classmethod
    def from_model(
        cls,
        model: ActorCritic,
        device: str = "cpu",
        deterministic: bool = True,
        seed: int | None = None,
        allow_variants: bool = False,
    ) -> PPOAgent:
        """Wrap an in-memory model (e.g. during training, for the arena)."""
        agent = cls.__new__(cls)
        agent.checkpoint_path = None
        agent.info = {}
        agent.trained_variants = frozenset()
        agent.supported_variants = VARIANTS if allow_variants else frozenset()
        agent._setup(model, device, deterministic, seed)
        return agent

    def _setup(
        self, model: ActorCritic, device: str, deterministic: bool, seed: int | None
    ) -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.obs_version = model.obs_version  # a v1 model reads butifarra_v1 observations
        self.deterministic = bool(deterministic)
        self.generator = torch.Generator(device=self.device)
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        """Reseed the sampling generator (greedy play ignores it)."""
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))

    @torch.inference_mode()  # no autograd bookkeeping at all
    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        obs, masks = check_batch(observations, action_masks, self.obs_version)
        if not (masks != 0).any(axis=1).all():
            raise ValueError("some row of the action mask has no legal action")
        o = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.uint8)).to(self.device)
        m = torch.from_numpy(np.ascontiguousarray(masks != 0)).to(self.device)
        logits = masked_logits(self.model.logits(o, m), m)
        if self.deterministic:
            actions = logits.argmax(-1)
        else:
            probs = torch.softmax(logits, -1)
            actions = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
        return actions.cpu().numpy().astype(np.int64)

    @torch.inference_mode()  # no autograd bookkeeping at all
    def action_probs_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """Softmax of the masked logits (0 on illegal actions), for game records; draws nothing."""
        obs, masks = check_batch(observations, action_masks, self.obs_version)
        o = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.uint8)).to(self.device)
        m = torch.from_numpy(np.ascontiguousarray(masks != 0)).to(self.device)
        probs = torch.softmax(masked_logits(self.model.logits(o, m), m), -1)
        return probs.cpu().numpy().astype(np.float64)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(self.act_batch(np.asarray(observation)[None], np.asarray(action_mask)[None])[0])
