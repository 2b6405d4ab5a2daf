"""The PPO policy/value network and its checkpoint format: what an agent needs to play.

It lives with the agents, not in ``train/``, because running a trained policy must not need
the training code (imports only point down: ``agents`` < ``train``). ``train/ppo.py`` builds,
trains and saves these models; :class:`~agents.ppo_agent.PPOAgent` loads and plays them. The
observation layout comes from :mod:`butifarra_env.observation` alone: no offsets here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np
import torch
import torch.nn as nn

from butifarra_env import observation
from butifarra_env.actions import N_ACTIONS
from butifarra_env.cards import N_CARDS, N_SUITS
from butifarra_env.observation import OBS_SIZE
from butifarra_env.rules import N_SEATS, TRUMP_UNSET

CHECKPOINT_FORMAT = "butifarra-ppo"
CHECKPOINT_VERSION = 1
Checkpoint = dict[str, Any]
"""A loaded checkpoint: ``format``, ``version``, ``arch``, ``model`` (state_dict), ``config``
and whatever the writer added (training counters, optimiser state...); plain containers and
tensors only, so ``torch.load(..., weights_only=True)`` reads it."""

MASK_VALUE = -1e8
"""Logit given to illegal actions: finite (no NaN in softmax/entropy), exp() underflows to 0."""


class Arch(TypedDict):
    """A model's architecture, stored in its checkpoint as a plain dict."""

    obs_size: int
    n_actions: int
    hidden: int
    layers: int
    activation: str
    central_value: bool
    canonical_suits: bool
    mask_input: bool


# ----------------------------------------------------------------------------- masked policy
def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Replace illegal logits with a large finite negative (never -inf: no NaN anywhere)."""
    return torch.where(mask.bool(), logits, torch.full_like(logits, MASK_VALUE))


def masked_log_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of the masked categorical (illegal entries are ~ -1e8)."""
    return torch.log_softmax(masked_logits(logits, mask), dim=-1)


def masked_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy over legal actions only (0 when a single action is legal)."""
    logp = masked_log_probs(logits, mask)
    plogp = torch.where(mask.bool(), logp.exp() * logp, torch.zeros_like(logp))
    return -plogp.sum(-1)


def sample_masked(
    logits: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one legal action per row; returns (actions, their log-probs)."""
    logp = masked_log_probs(logits, mask)
    actions = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return actions, logp.gather(-1, actions[:, None]).squeeze(-1)


# ----------------------------------------------------------------------------- inputs
HIDDEN_HANDS_SIZE = (N_SEATS - 1) * N_CARDS
"""Extra critic input: the other three hands, relative to the mover (next, partner, previous)."""

_HAND_COLUMNS = np.stack(
    [observation.PERMUTATION[s, observation.field_slice("hand")] for s in range(N_SEATS)]
)
"""(4, 48): where each absolute seat's hand lies in the full state (observation.encode_state)."""


def hidden_hands(state: np.ndarray, seat: np.ndarray) -> np.ndarray:
    """(N, 144) uint8 from the engine's full state (N, 639): the hands the mover cannot see,
    in relative seat order, for the centralised critic (never given to the policy)."""
    state = np.asarray(state)
    rel = (np.asarray(seat)[:, None] + np.arange(1, N_SEATS)[None, :]) % N_SEATS
    rows = np.arange(len(state))[:, None, None]
    return state[rows, _HAND_COLUMNS[rel]].reshape(len(state), HIDDEN_HANDS_SIZE)


def suit_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gather indices that relabel suits so the trump suit is always suit 0.

    Row ``t`` of each table is for trump value ``t`` as the observation one-hot stores it
    (0-3 a suit, ``NO_TRUMP`` butifarra, ``TRUMP_UNSET`` not chosen yet; the last two keep
    the identity). Returns (observation gather (6, 491), card gather (6, 48) for masks and
    hidden hands, action gather (6, 56) that maps canonical logits back to real action ids).
    """
    n_trumps = TRUMP_UNSET + 1
    obs_idx = np.tile(np.arange(OBS_SIZE), (n_trumps, 1))
    card_idx = np.tile(np.arange(N_CARDS), (n_trumps, 1))
    act_idx = np.tile(np.arange(N_ACTIONS), (n_trumps, 1))
    hand = observation.field_slice("hand")
    for t in range(N_SUITS):
        order = [t] + [s for s in range(N_SUITS) if s != t]  # canonical suit k <- real order[k]
        obs_idx[t] = observation.suit_permutation(order)
        card_idx[t] = obs_idx[t, hand] - hand.start
        act_idx[t, :N_CARDS] = np.argsort(card_idx[t])  # real card c sits at this position
    return obs_idx, card_idx, act_idx


# ----------------------------------------------------------------------------- network
def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights scaled by ``std``, constant bias (the usual PPO initialisation)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(width_in: int, hidden: int, layers: int) -> nn.Sequential:
    """``layers`` x (Linear -> ReLU), ``hidden`` wide."""
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [layer_init(nn.Linear(width_in, hidden)), nn.ReLU()]
        width_in = hidden
    return nn.Sequential(*mods)


class ActorCritic(nn.Module):
    """Policy MLP on the 491-byte observation with a 56-way head, and a value head.

    * ``canonical_suits``: suits are relabelled inside the model so that trump is always
      suit 0 (cards, voids, masks, hidden hands; logits mapped back), so what is learnt
      about playing trumps in one suit holds in all four. Observations stay as they are.
    * ``mask_input``: the legal-action mask is also an input (it summarises the trick).
    * ``central_value``: the value comes from its own MLP that also sees the three hidden
      hands (a centralised critic: lower-variance advantages; the policy never sees them).
      Without it, the value head shares the policy trunk.
    """

    obs_scale: torch.Tensor
    obs_idx: torch.Tensor
    card_idx: torch.Tensor
    act_idx: torch.Tensor

    def __init__(
        self,
        hidden: int = 256,
        layers: int = 2,
        central_value: bool = False,
        canonical_suits: bool = True,
        mask_input: bool = True,
    ) -> None:
        super().__init__()
        self.arch: Arch = {
            "obs_size": OBS_SIZE,
            "n_actions": N_ACTIONS,
            "hidden": hidden,
            "layers": layers,
            "activation": "relu",
            "central_value": bool(central_value),
            "canonical_suits": bool(canonical_suits),
            "mask_input": bool(mask_input),
        }
        self.central_value = bool(central_value)
        self.canonical_suits = bool(canonical_suits)
        self.mask_input = bool(mask_input)
        self.register_buffer("obs_scale", torch.from_numpy(observation.scale_vector()))
        obs_idx, card_idx, act_idx = suit_tables()
        self.register_buffer("obs_idx", torch.from_numpy(obs_idx), persistent=False)
        self.register_buffer("card_idx", torch.from_numpy(card_idx), persistent=False)
        self.register_buffer("act_idx", torch.from_numpy(act_idx), persistent=False)
        width = OBS_SIZE + (N_ACTIONS if self.mask_input else 0)
        self.trunk = mlp(width, hidden, layers)
        self.policy = layer_init(nn.Linear(hidden, N_ACTIONS), std=0.01)
        if self.central_value:
            self.critic = mlp(width + HIDDEN_HANDS_SIZE, hidden, layers)
        self.value = layer_init(nn.Linear(hidden, 1), std=1.0)

    def _inputs(
        self, obs: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Scaled (and suit-canonical) policy input, and the trump index per row."""
        trump = None
        if self.canonical_suits:
            trump = obs[:, observation.field_slice("trump")].argmax(-1)
            obs = obs.gather(1, self.obs_idx[trump])
        x = obs.float() * self.obs_scale
        if self.mask_input:
            m = mask.to(x.dtype)
            if trump is not None:
                cards = m[:, :N_CARDS].gather(1, self.card_idx[trump])
                m = torch.cat([cards, m[:, N_CARDS:]], dim=-1)
            x = torch.cat([x, m], dim=-1)
        return x, trump

    def _real_logits(self, logits: torch.Tensor, trump: torch.Tensor | None) -> torch.Tensor:
        return logits if trump is None else logits.gather(1, self.act_idx[trump])

    def logits(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Policy logits (N, 56) from observations and masks (no hidden information)."""
        x, trump = self._inputs(obs, mask)
        return self._real_logits(self.policy(self.trunk(x)), trump)

    def forward(
        self, obs: torch.Tensor, mask: torch.Tensor, hidden: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (N,56), values (N,)); ``hidden`` (N,144) is required by a central critic."""
        x, trump = self._inputs(obs, mask)
        h = self.trunk(x)
        if self.central_value:
            if hidden is None:
                raise ValueError("a central-value model needs the hidden hands for its value")
            if trump is not None:
                hidden = hidden.reshape(-1, N_SEATS - 1, N_CARDS).gather(
                    2, self.card_idx[trump][:, None, :].expand(-1, N_SEATS - 1, -1)
                )
            hv = self.critic(torch.cat([x, hidden.reshape(-1, HIDDEN_HANDS_SIZE).float()], -1))
        else:
            hv = h
        return self._real_logits(self.policy(h), trump), self.value(hv).squeeze(-1)


def build_model(arch: Mapping[str, object]) -> ActorCritic:
    """Rebuild a model from a checkpoint's ``arch`` dict (raises ValueError if unknown)."""
    if arch.get("obs_size") != OBS_SIZE or arch.get("n_actions") != N_ACTIONS:
        raise ValueError(
            f"architecture mismatch: checkpoint has obs_size={arch.get('obs_size')}, "
            f"n_actions={arch.get('n_actions')}; this code needs {OBS_SIZE} and {N_ACTIONS}"
        )
    if arch.get("activation", "relu") != "relu":
        raise ValueError(f"unknown activation {arch.get('activation')!r}")
    return ActorCritic(
        hidden=_arch_int(arch, "hidden"),
        layers=_arch_int(arch, "layers"),
        central_value=bool(arch.get("central_value", False)),
        canonical_suits=bool(arch.get("canonical_suits", False)),
        mask_input=bool(arch.get("mask_input", False)),
    )


def _arch_int(arch: Mapping[str, object], key: str) -> int:
    value = arch[key]  # KeyError when missing, reported by model_from_checkpoint
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"arch[{key!r}] must be an int >= 1, got {value!r}")
    return int(value)


# ----------------------------------------------------------------------------- checkpoints
def model_payload(
    model: ActorCritic,
    config: Mapping[str, object],
    extra: Mapping[str, object] | None = None,
) -> Checkpoint:
    """Agent checkpoint of ``model``: tensors and plain containers only (loads with
    ``weights_only=True``). ``config`` is the training configuration as a plain dict;
    ``extra`` entries (training counters...) are added at the top level."""
    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "arch": dict(model.arch),
        "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "config": dict(config),
        **(extra or {}),
    }


def load_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Load and sanity-check a checkpoint; ValueError naming the file on any problem."""
    name = repr(os.fspath(path))
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint {name} does not exist")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a corrupt file
        raise ValueError(f"checkpoint {name} is corrupt or not a torch file: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint {name} is not a {CHECKPOINT_FORMAT} checkpoint")
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"checkpoint {name} has version {data.get('version')!r}, expected {CHECKPOINT_VERSION}"
        )
    return data


def model_from_checkpoint(data: Checkpoint, path: str | os.PathLike[str]) -> ActorCritic:
    """Build the model of a loaded checkpoint; ValueError (naming ``path``) on a mismatch."""
    try:
        model = build_model(data["arch"])
        model.load_state_dict(data["model"])
    except (KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(f"checkpoint {os.fspath(path)!r} does not fit this model: {exc}") from exc
    return model
