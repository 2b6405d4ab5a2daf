"""The PPO policy/value network and its checkpoint format: what an agent needs to play.

It lives with the agents, not in ``train/``, because running a trained policy must not need
the training code (imports only point down: ``agents`` < ``train``). ``train/ppo.py`` builds,
trains and saves these models; :class:`~agents.ppo_agent.PPOAgent` loads and plays them. The
observation layout comes from :mod:`butifarra_env.core.observation` alone: no offsets here.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import re
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple, TypedDict

import numpy as np
import torch
import torch.nn as nn

from butifarra_env.core import observation
from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.cards import BEATS, N_CARDS, N_SUITS, POINTS, STRENGTH, SUIT
from butifarra_env.core.observation import check_version, layout
from butifarra_env.core.rules import N_SEATS, TRUMP_UNSET

CHECKPOINT_FORMAT = "butifarra-ppo"
CHECKPOINT_VERSION = 2
"""Version 2 adds the ``fingerprint`` (see :func:`fingerprint`); the layout is otherwise v1's."""
READABLE_VERSIONS = (1, 2)
"""Versions :func:`load_checkpoint` reads (version 1 with an UnverifiedCheckpointWarning)."""
Checkpoint = dict[str, Any]
"""A loaded checkpoint: ``format``, ``version``, ``arch``, ``model`` (state_dict), ``config``,
``fingerprint`` and whatever the writer added (training counters, optimiser state...); plain
containers and tensors only, so ``torch.load(..., weights_only=True)`` reads it."""
MAX_HIDDEN = 4096
"""Widest MLP a config or checkpoint may ask for (bounds what loading a file can allocate)."""
MAX_LAYERS = 16
"""Deepest MLP a config or checkpoint may ask for."""

MASK_VALUE = -1e8
"""Logit given to illegal actions: finite (no NaN in softmax/entropy), exp() underflows to 0."""


class _ArchKeys(TypedDict):
    """The keys every architecture has (checkpoints of every version)."""

    obs_size: int
    n_actions: int
    hidden: int
    layers: int
    activation: str
    central_value: bool
    canonical_suits: bool
    mask_input: bool
    belief: bool
    card_features: bool
    card_head: bool


class Arch(_ArchKeys, total=False):
    """A model's architecture, stored in its checkpoint as a plain dict."""

    obs_version: int
    """The observation version the model reads (absent: 0, the 491-value v0)."""
    critic_hidden: int
    """Width of the centralised critic's layers (absent: the trunk's ``hidden``)."""


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


def suit_tables(obs_version: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gather indices that relabel suits so the trump suit is always suit 0.

    Row ``t`` of each table is for trump value ``t`` as the observation one-hot stores it
    (0-3 a suit, ``NO_TRUMP`` butifarra, ``TRUMP_UNSET`` not chosen yet; the last two keep
    the identity). Returns (observation gather (6, 491), card gather (6, 48) for masks and
    hidden hands, action gather (6, 56) that maps canonical logits back to real action ids).
    """
    n_trumps = TRUMP_UNSET + 1
    lay = layout(obs_version)
    obs_idx = np.tile(np.arange(lay.size), (n_trumps, 1))
    card_idx = np.tile(np.arange(N_CARDS), (n_trumps, 1))
    act_idx = np.tile(np.arange(N_ACTIONS), (n_trumps, 1))
    hand = observation.field_slice("hand")
    for t in range(N_SUITS):
        order = [t] + [s for s in range(N_SUITS) if s != t]  # canonical suit k <- real order[k]
        obs_idx[t] = lay.suit_permutation(order)
        card_idx[t] = obs_idx[t, hand] - hand.start
        act_idx[t, :N_CARDS] = np.argsort(card_idx[t])  # real card c sits at this position
    return obs_idx, card_idx, act_idx


# ----------------------------------------------------------------------------- card features
CARD_FEATURES = 33
"""Per-card inputs of the card head (:func:`card_inputs`): nothing names a suit, so one
set of weights reads every card the same way."""
RELATIONAL_SIZE = 3 * N_CARDS + 3
"""Extra trunk inputs with ``card_features``: per card (stronger cards of its suit still
out, it is the master of its suit, it would win the trick now) and per position (the
partner is winning the trick, the trick has started, its points so far)."""
CARD_EMBED = 64
"""Width of the card head's per-card embedding."""
HAND_CARDS = 12
"""Cards in a full hand: the card head runs on this many slots per position."""


def card_tables() -> dict[str, np.ndarray]:
    """Constant per-card tables from the rules core, as float32 arrays for the model."""
    suit = np.zeros((N_CARDS, N_SUITS), np.float32)
    suit[np.arange(N_CARDS), SUIT] = 1.0
    stronger = np.array(
        [[(BEATS[c] >> d) & 1 for d in range(N_CARDS)] for c in range(N_CARDS)], np.float32
    )
    rank = np.zeros((N_CARDS, len(set(STRENGTH))), np.float32)
    rank[np.arange(N_CARDS), STRENGTH] = 1.0
    return {
        "suit": suit,  # (48, 4) one-hot suit of each card
        "stronger": stronger,  # (48, 48): [c, d] = d is of c's suit and beats c
        "strength": np.asarray(STRENGTH, np.float32),  # 0 (the 2) .. 11 (the manilla)
        "points": np.asarray(POINTS, np.float32),
        "rank": rank,  # (48, 12) one-hot strength
    }


def card_inputs(
    obs: torch.Tensor,
    legal: torch.Tensor,
    t: Mapping[str, torch.Tensor],
    cards: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What the rules say about each card, computed from one seat's observations.

    ``obs`` (N, 491) unscaled, ``legal`` (N, 48) the card part of the mask, ``t`` the
    :func:`card_tables` as tensors, ``cards`` (N, K) the card ids to describe per row (all
    48 when None). Returns (per card (N, K, CARD_FEATURES), relational per card (N, 48, 3),
    per position (N, 3)); see :data:`RELATIONAL_SIZE`. Only what the mover sees is used
    (cards out are those neither in the hand nor played).
    """
    n = obs.shape[0]
    x = obs.float()
    hand = x[:, observation.field_slice("hand")]
    played = x[:, observation.field_slice("played")].reshape(n, N_SEATS, N_CARDS)
    trick = x[:, observation.field_slice("trick")].reshape(n, N_SEATS, N_CARDS)
    leader = x[:, observation.field_slice("trick_leader")]
    voids = x[:, observation.field_slice("voids")].reshape(n, N_SEATS, N_SUITS)
    trump_suit = x[:, observation.field_slice("trump")][:, :N_SUITS]  # zeros: none or unset
    on_trick = trick.sum(1)
    seen = (hand + played.sum(1) + on_trick).clamp(max=1.0)
    out = 1.0 - seen
    stronger_out = out @ t["stronger"].T  # (N, 48) cards of c's suit that beat c, still out
    master = (stronger_out == 0).float()
    is_trump = trump_suit @ t["suit"].T
    led = ((leader[:, :, None] * trick).sum(1) @ t["suit"]) @ t["suit"].T  # card of led suit
    key = is_trump * (100.0 + t["strength"]) + (1.0 - is_trump) * led * (1.0 + t["strength"])
    started = (on_trick.sum(1, keepdim=True) > 0).float()
    winning = (trick * key[:, None, :]).sum(-1)  # (N, 4) each seat's card's trick key
    best = winning.max(-1, keepdim=True).values
    beats = (key > best).float() * started
    partner_wins = (winning.argmax(-1, keepdim=True) == 2).float() * started
    trick_points = (on_trick * t["points"]).sum(1, keepdim=True) / 20.0
    relational = torch.stack([stronger_out / 11.0, master, beats], 1)  # (N, 3, 48)
    rows = torch.cat(  # (N, 21, 48): one row per feature, cards along the last axis
        [
            hand[:, None],
            played,
            trick,
            legal.float()[:, None],
            out[:, None],
            relational,
            voids[:, 1:, :] @ t["suit"].T,  # the other seats have shown a void in its suit
            ((hand @ t["suit"]) @ t["suit"].T / 12.0)[:, None],  # my cards of its suit
            is_trump[:, None],
            led[:, None],
        ],
        1,
    )
    static = torch.cat([t["points"][:, None] / 5.0, t["rank"]], 1)  # (48, 13)
    if cards is None:
        per_card = torch.cat([rows.transpose(1, 2), static.expand(n, -1, -1)], -1)
    else:
        picked = rows.gather(2, cards[:, None, :].expand(-1, rows.shape[1], -1))
        per_card = torch.cat([picked.transpose(1, 2), static[cards]], -1)
    position = torch.cat([partner_wins, started, trick_points], -1)
    return per_card, relational.transpose(1, 2), position


# ----------------------------------------------------------------------------- network
class NetInputs(NamedTuple):
    """A batch of positions as the network reads them (:meth:`ActorCritic.inputs`). No
    parameter goes into them, so a batch that is read several times (the PPO update's epochs)
    computes them once."""

    x: torch.Tensor
    """(N, input width) trunk input: scaled, suit-canonical observation, mask, card features."""
    trump: torch.Tensor | None
    """(N,) trump index per row (None without ``canonical_suits``)."""
    held_ids: torch.Tensor | None
    """(N, 12) the card ids the card head reads (None without ``card_head``)."""
    held_features: torch.Tensor | None
    """(N, 12, CARD_FEATURES) their features."""
    held_legal: torch.Tensor | None = None
    """(N, 12) bool: the card head runs on these slots only (None: on all 12)."""

    def rows(self, j: torch.Tensor) -> NetInputs:
        """The rows ``j`` (a minibatch); ``index_select``, several times faster on the CPU
        than ``t[j]`` for the same rows."""

        def pick(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.index_select(0, j)

        x, trump, ids, features, legal = (pick(t) for t in self)
        assert x is not None
        return NetInputs(x, trump, ids, features, legal)


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
    * ``belief``: a linear head on the policy trunk predicts, for each of the 48 cards,
      whether each other seat holds it (:meth:`belief_logits`). Trained as an auxiliary
      loss, it makes the trunk keep track of who can still hold what; playing ignores it.
    * ``card_features``: the trunk (and critic) also get :data:`RELATIONAL_SIZE` inputs the
      rules give directly (:func:`card_inputs`): which cards are masters, which would win
      the trick now, whether the partner is winning it.
    * ``card_head``: each card's logit gets a term from one small network shared by all 48
      cards, reading that card's :data:`CARD_FEATURES` and the trunk's output, so what is
      learnt about one card (play the master, do not beat the partner) holds for all.
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
        belief: bool = False,
        card_features: bool = False,
        card_head: bool = False,
        obs_version: int = 0,
        critic_hidden: int = 0,
    ) -> None:
        super().__init__()
        check_critic(critic_hidden, central_value)
        self.arch: Arch = make_arch(
            hidden, layers, central_value, canonical_suits, mask_input, belief,
            card_features, card_head, obs_version, critic_hidden,
        )  # fmt: skip
        self.obs_version = check_version(obs_version)
        self.central_value = bool(central_value)
        self.canonical_suits = bool(canonical_suits)
        self.mask_input = bool(mask_input)
        self.register_buffer("obs_scale", torch.from_numpy(layout(obs_version).scale_vector()))
        obs_idx, card_idx, act_idx = suit_tables(obs_version)
        self.register_buffer("obs_idx", torch.from_numpy(obs_idx), persistent=False)
        self.register_buffer("card_idx", torch.from_numpy(card_idx), persistent=False)
        self.register_buffer("act_idx", torch.from_numpy(act_idx), persistent=False)
        self.card_features, self.card_head = bool(card_features), bool(card_head)
        tables = card_tables()
        self.card_table_names = tuple(tables)
        for name, table in tables.items():
            self.register_buffer(f"card_{name}", torch.from_numpy(table), persistent=False)
        width = input_width(self.arch)
        self.trunk = mlp(width, hidden, layers)
        self.policy = layer_init(nn.Linear(hidden, N_ACTIONS), std=0.01)
        value_width = critic_width(self.arch)
        if self.central_value:
            self.critic = mlp(width + HIDDEN_HANDS_SIZE, value_width, layers)
        self.value = layer_init(nn.Linear(value_width, 1), std=1.0)
        if belief:
            self.belief = layer_init(nn.Linear(hidden, HIDDEN_HANDS_SIZE), std=0.01)
        if self.card_head:
            self.card_embed = mlp(CARD_FEATURES, CARD_EMBED, 2)
            self.card_mix = layer_init(nn.Linear(CARD_EMBED, CARD_EMBED))
            self.card_context = layer_init(nn.Linear(hidden, CARD_EMBED))
            self.card_logit = layer_init(nn.Linear(CARD_EMBED, 1), std=0.01)

    def _tables(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, f"card_{k}") for k in self.card_table_names}

    def inputs(self, obs: torch.Tensor, mask: torch.Tensor, legal_cards: bool = False) -> NetInputs:
        """What the network reads of these positions (:class:`NetInputs`): the scaled (and
        suit-canonical) trunk input, the trump index per row, and for a card head the held
        cards' ids (N, 12) and features (N, 12, CARD_FEATURES). With ``legal_cards`` the card
        head runs on the legal cards only (3 of the 12 on average in training): the same
        masked policy for a quarter of the head's work, but the logits of illegal held cards
        (masked everywhere) lack the head's term, so only :meth:`logits` is bit-identical to
        the checkpoint's golden outputs (``tests/test_ppo_golden.py``)."""
        trump = None
        if self.canonical_suits:
            trump = obs[:, observation.field_slice("trump")].argmax(-1)
            obs = obs.gather(1, self.obs_idx.index_select(0, trump))
        x = obs.float() * self.obs_scale
        m = mask.to(x.dtype)
        if trump is not None:
            cards = m[:, :N_CARDS].gather(1, self.card_idx.index_select(0, trump))
            m = torch.cat([cards, m[:, N_CARDS:]], dim=-1)
        parts = [x, m] if self.mask_input else [x]
        held_ids = held_features = None
        if self.card_features or self.card_head:
            idx = None
            if self.card_head:  # only held cards can be played: run the head on those
                idx = torch.topk(obs[:, observation.field_slice("hand")], HAND_CARDS).indices
            per_card, relational, position = card_inputs(obs, m[:, :N_CARDS], self._tables(), idx)
            if self.card_features:
                parts += [relational.flatten(1), position]
            if idx is not None:
                held_ids, held_features = idx, per_card
        x = torch.cat(parts, dim=-1) if len(parts) > 1 else x  # one copy of the trunk input
        legal = None
        if legal_cards and held_ids is not None:
            legal = m[:, :N_CARDS].gather(1, held_ids) > 0
        return NetInputs(x, trump, held_ids, held_features, legal)

    def _policy(self, h: torch.Tensor, inp: NetInputs) -> torch.Tensor:
        """Canonical logits from the trunk output (plus the shared per-card term on the
        held cards; the other card logits are masked anyway)."""
        logits = self.policy(h)
        if inp.held_ids is None or inp.held_features is None:
            return logits
        idx, feats = inp.held_ids, inp.held_features
        if inp.held_legal is None:  # every held card
            mixed = self.card_mix(self.card_embed(feats)) + self.card_context(h)[:, None, :]
            term = self.card_logit(torch.relu(mixed)).squeeze(-1)
            cards = torch.zeros_like(logits[:, :N_CARDS]).scatter(1, idx, term)
        else:  # the legal ones only, as a flat list of (row, slot) pairs
            row, slot = inp.held_legal.nonzero(as_tuple=True)
            mixed = self.card_mix(self.card_embed(feats[row, slot])) + self.card_context(h)[row]
            term = self.card_logit(torch.relu(mixed)).squeeze(-1)
            cards = torch.zeros_like(logits[:, :N_CARDS]).index_put((row, idx[row, slot]), term)
        return torch.cat([logits[:, :N_CARDS] + cards, logits[:, N_CARDS:]], dim=-1)

    def _real_logits(self, logits: torch.Tensor, trump: torch.Tensor | None) -> torch.Tensor:
        return logits if trump is None else logits.gather(1, self.act_idx.index_select(0, trump))

    def logits(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Policy logits (N, 56) from observations and masks (no hidden information)."""
        inp = self.inputs(obs, mask)
        return self._real_logits(self._policy(self.trunk(inp.x), inp), inp.trump)

    def _canonical_hands(self, hidden: torch.Tensor, trump: torch.Tensor | None) -> torch.Tensor:
        """(N, 144) hidden hands with the model's suit relabelling applied."""
        if trump is None:
            return hidden.reshape(-1, HIDDEN_HANDS_SIZE)
        return (
            hidden.reshape(-1, N_SEATS - 1, N_CARDS)
            .gather(2, self.card_idx.index_select(0, trump)[:, None, :].expand(-1, N_SEATS - 1, -1))
            .reshape(-1, HIDDEN_HANDS_SIZE)
        )

    def forward(
        self, obs: torch.Tensor, mask: torch.Tensor, hidden: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (N,56), values (N,)); ``hidden`` (N,144) is required by a central critic.
        The belief head is not run (acting needs no belief loss)."""
        logits, values, _ = self.forward_inputs(self.inputs(obs, mask), hidden, belief=False)
        return logits, values

    def forward_all(
        self, obs: torch.Tensor, mask: torch.Tensor, hidden: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """:meth:`forward` plus the belief loss (binary cross-entropy of the belief head
        against ``hidden``, mean over cards and seats; None without a belief head)."""
        return self.forward_inputs(self.inputs(obs, mask), hidden)

    def forward_inputs(
        self, inp: NetInputs, hidden: torch.Tensor | None = None, belief: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """:meth:`forward_all` from inputs already computed by :meth:`inputs` (the PPO update
        computes them once per batch and reads minibatches of them: :meth:`NetInputs.rows`);
        ``belief=False`` skips the belief head (its loss is then None)."""
        x, trump = inp.x, inp.trump
        h = self.trunk(x)
        belief = belief and self.arch["belief"]
        if (self.central_value or belief) and hidden is None:
            raise ValueError("a central-value or belief model needs the hidden hands to train")
        canon = None if hidden is None else self._canonical_hands(hidden, trump).float()
        if self.central_value:
            assert canon is not None
            hv = self.critic(torch.cat([x, canon], -1))
        else:
            hv = h
        belief_loss = None
        if belief:
            assert canon is not None
            belief_loss = nn.functional.binary_cross_entropy_with_logits(self.belief(h), canon)
        logits = self._real_logits(self._policy(h, inp), trump)
        return logits, self.value(hv).squeeze(-1), belief_loss

    def belief_logits(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(N, 3, 48) logits that the next, partner and previous seat hold each card (real
        card ids), from what the mover sees; ValueError for a model without a belief head."""
        if not self.arch["belief"]:
            raise ValueError("this model has no belief head (trained without --belief-coef)")
        inp = self.inputs(obs, mask)
        trump = inp.trump
        b = self.belief(self.trunk(inp.x)).reshape(-1, N_SEATS - 1, N_CARDS)
        if trump is None:
            return b
        back = torch.argsort(self.card_idx[trump], dim=-1)  # real card c sits at this position
        return b.gather(2, back[:, None, :].expand(-1, N_SEATS - 1, -1))


# ----------------------------------------------------------------------------- architecture
def make_arch(
    hidden: int,
    layers: int,
    central_value: bool,
    canonical_suits: bool,
    mask_input: bool,
    belief: bool = False,
    card_features: bool = False,
    card_head: bool = False,
    obs_version: int = 0,
    critic_hidden: int = 0,
) -> Arch:
    """The ``arch`` dict of a model with these settings (what its checkpoint stores; a v0
    model's has no ``obs_version`` key, and one whose critic is as wide as its trunk
    (``critic_hidden`` 0) no ``critic_hidden`` key, so its checkpoint is what it always was)."""
    arch: Arch = {
        "obs_size": layout(obs_version).size,
        "n_actions": N_ACTIONS,
        "hidden": hidden,
        "layers": layers,
        "activation": "relu",
        "central_value": bool(central_value),
        "canonical_suits": bool(canonical_suits),
        "mask_input": bool(mask_input),
        "belief": bool(belief),
        "card_features": bool(card_features),
        "card_head": bool(card_head),
    }
    if obs_version:
        arch["obs_version"] = check_version(obs_version)
    if critic_hidden:
        arch["critic_hidden"] = critic_hidden
    return arch


def check_critic(critic_hidden: int, central_value: bool) -> None:
    """A critic width is only meaningful for a centralised critic: without one the value head
    reads the policy trunk, whose width is ``hidden``."""
    if critic_hidden and not central_value:
        raise ValueError(
            f"critic_hidden={critic_hidden} needs central_value (without it the value head "
            "reads the policy trunk); leave critic_hidden at 0 or turn central_value on"
        )


def critic_width(arch: Arch) -> int:
    """Width of the centralised critic's layers: ``critic_hidden``, or the trunk's (0/absent)."""
    return arch.get("critic_hidden", 0) or arch["hidden"]


def input_width(arch: Arch) -> int:
    """Width of the trunk's input for ``arch`` (the critic adds the hidden hands)."""
    return (
        arch["obs_size"]
        + (N_ACTIONS if arch["mask_input"] else 0)
        + (RELATIONAL_SIZE if arch["card_features"] else 0)
    )


_ARCH_TYPES: dict[str, type] = {
    "obs_size": int, "n_actions": int, "hidden": int, "layers": int, "activation": str,
    "central_value": bool, "canonical_suits": bool, "mask_input": bool, "belief": bool,
    "card_features": bool, "card_head": bool, "obs_version": int, "critic_hidden": int,
}  # fmt: skip
ARCH_DEFAULTS: dict[str, object] = {
    "belief": False, "card_features": False, "card_head": False, "obs_version": 0,
    "critic_hidden": 0,
}  # fmt: skip
"""Arch keys that older checkpoints lack, and the value they mean there."""


def check_arch(arch: object) -> Arch:
    """``arch`` as an :class:`Arch`, or ValueError saying what is wrong: every key present
    with its type, sizes within MAX_HIDDEN/MAX_LAYERS, and fitting this code's observation
    and action sizes. Pure arithmetic on the dict: nothing is built or allocated."""
    if not isinstance(arch, Mapping):
        raise ValueError(f"arch must be a dict, got {type(arch).__name__}")
    arch = {**ARCH_DEFAULTS, **arch}
    missing = sorted(set(_ARCH_TYPES) - set(arch))
    unknown = sorted(map(str, set(arch) - set(_ARCH_TYPES)))
    if missing or unknown:
        raise ValueError(f"arch keys: missing {missing}, unknown {unknown}")
    for key, kind in _ARCH_TYPES.items():
        value = arch[key]
        ok = isinstance(value, bool) if kind is bool else type(value) is kind
        if not ok:
            raise ValueError(f"arch[{key!r}] must be a {kind.__name__}, got {value!r}")
    version = check_version(arch["obs_version"])
    size = layout(version).size
    if arch["obs_size"] != size or arch["n_actions"] != N_ACTIONS:
        raise ValueError(
            f"architecture mismatch: arch has obs_size={arch['obs_size']}, "
            f"n_actions={arch['n_actions']}; observation v{version} needs {size} and "
            f"{N_ACTIONS}"
        )
    if arch["activation"] != "relu":
        raise ValueError(f"arch['activation'] must be 'relu', got {arch['activation']!r}")
    for key, low, top in (
        ("hidden", 1, MAX_HIDDEN), ("layers", 1, MAX_LAYERS), ("critic_hidden", 0, MAX_HIDDEN),
    ):  # fmt: skip
        if not low <= arch[key] <= top:
            raise ValueError(f"arch[{key!r}] must be an int {low}-{top}, got {arch[key]}")
    check_critic(arch["critic_hidden"], arch["central_value"])
    return make_arch(
        arch["hidden"], arch["layers"], arch["central_value"], arch["canonical_suits"],
        arch["mask_input"], arch["belief"], arch["card_features"], arch["card_head"], version,
        arch["critic_hidden"],
    )  # fmt: skip


def state_shapes(arch: Arch) -> dict[str, tuple[int, ...]]:
    """The state_dict an :class:`ActorCritic` of ``arch`` has: name -> shape, computed
    without building it (so a checkpoint's tensors are checked before anything is built)."""
    hidden, layers = arch["hidden"], arch["layers"]
    width = input_width(arch)
    shapes: dict[str, tuple[int, ...]] = {"obs_scale": (arch["obs_size"],)}

    def add_mlp(prefix: str, width_in: int, out: int) -> None:
        for i in range(layers):
            shapes[f"{prefix}.{2 * i}.weight"] = (out, width_in)
            shapes[f"{prefix}.{2 * i}.bias"] = (out,)
            width_in = out

    add_mlp("trunk", width, hidden)
    shapes["policy.weight"], shapes["policy.bias"] = (N_ACTIONS, hidden), (N_ACTIONS,)
    value_width = critic_width(arch)  # the trunk's width without a centralised critic
    if arch["central_value"]:
        add_mlp("critic", width + HIDDEN_HANDS_SIZE, value_width)
    shapes["value.weight"], shapes["value.bias"] = (1, value_width), (1,)
    if arch["belief"]:
        shapes["belief.weight"] = (HIDDEN_HANDS_SIZE, hidden)
        shapes["belief.bias"] = (HIDDEN_HANDS_SIZE,)
    if arch["card_head"]:
        e = CARD_EMBED
        shapes["card_embed.0.weight"], shapes["card_embed.0.bias"] = (e, CARD_FEATURES), (e,)
        shapes["card_embed.2.weight"], shapes["card_embed.2.bias"] = (e, e), (e,)
        shapes["card_mix.weight"], shapes["card_mix.bias"] = (e, e), (e,)
        shapes["card_context.weight"], shapes["card_context.bias"] = (e, hidden), (e,)
        shapes["card_logit.weight"], shapes["card_logit.bias"] = (1, e), (1,)
    return shapes


def check_weights(state: object, arch: Arch) -> dict[str, torch.Tensor]:
    """``state`` as a state_dict that fits ``arch`` exactly (names, shapes, float dtype) and
    holds only finite numbers; ValueError naming the first tensor that does not."""
    if not isinstance(state, Mapping) or not all(isinstance(k, str) for k in state):
        raise ValueError("the model weights must be a dict of named tensors")
    expected = state_shapes(arch)
    missing, unknown = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unknown:
        raise ValueError(
            f"the weights do not fit arch (hidden={arch['hidden']}, layers={arch['layers']}, "
            f"central_value={arch['central_value']}): missing {missing}, unexpected {unknown}"
        )
    for name, shape in expected.items():
        t = state[name]
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise ValueError(f"weight {name!r} must be a float tensor, got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(
                f"weight {name!r} has shape {tuple(t.shape)} but arch (hidden={arch['hidden']}, "
                f"layers={arch['layers']}, critic width {critic_width(arch)}) needs {shape}"
            )
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"weight {name!r} holds NaN or infinite values")
    return dict(state)


def build_model(arch: Mapping[str, object]) -> ActorCritic:
    """Rebuild a model from a checkpoint's ``arch`` dict (ValueError if it is not valid)."""
    a = check_arch(arch)
    return ActorCritic(
        a["hidden"], a["layers"], a["central_value"], a["canonical_suits"], a["mask_input"],
        a["belief"], a["card_features"], a["card_head"], a.get("obs_version", 0),
        a.get("critic_hidden", 0),
    )  # fmt: skip


# ----------------------------------------------------------------------------- checkpoints
def fingerprint(payload: Mapping[str, object]) -> str:
    """``sha256:<hex>`` over everything in a checkpoint but its ``fingerprint`` entry: every
    key, plain value and tensor (dtype, shape and bytes), in a canonical order. It detects a
    checkpoint whose architecture, settings or weights were changed after it was written."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in payload.items() if k != "fingerprint"})
    return f"sha256:{h.hexdigest()}"


def _feed(h: Any, obj: object) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, Mapping):
        h.update(f"{{{len(obj)};".encode())
        for key in sorted(obj, key=repr):
            _feed(h, key)
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update(f"[{len(obj)};".encode())
        for item in obj:
            _feed(h, item)
    else:
        h.update(f"{type(obj).__name__}:{obj!r};".encode())


def model_payload(
    model: ActorCritic,
    config: Mapping[str, object],
    extra: Mapping[str, object] | None = None,
) -> Checkpoint:
    """Agent checkpoint of ``model``: tensors and plain containers only (loads with
    ``weights_only=True``), sealed with its :func:`fingerprint`. ``config`` is the training
    configuration as a plain dict; ``extra`` entries (training counters, optimiser
    state...) are added at the top level and covered by the fingerprint."""
    payload: Checkpoint = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "arch": dict(model.arch),
        "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "config": dict(config),
        **(extra or {}),
    }
    payload["fingerprint"] = fingerprint(payload)
    return payload


class UnverifiedCheckpointWarning(UserWarning):
    """A version-1 checkpoint (no fingerprint) was loaded: changes to it go undetected."""


def _refused_global(message: str) -> str:
    """The name torch's weights-only unpickler refused (e.g. ``posix.system``), as
    `` (posix.system)``, or "" when its message names none. Its advice to retry with
    ``weights_only=False`` is dropped: that would run the code."""
    match = re.search(r"Unsupported global: GLOBAL ([\w.]+)", message) or re.search(
        r"(?:global|GLOBAL) ['\"]?([\w.]+)", message
    )
    return f" ({match.group(1)})" if match else ""


def load_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Load and verify a checkpoint; ValueError naming the file and what is wrong.

    Checked in this order, all before any model is built: a readable torch file (read with
    ``weights_only=True``: no pickled code runs), the format and version, the ``arch``
    (types, bounded sizes), the weights against the shapes that ``arch`` implies (so a
    forged ``arch`` cannot make us allocate a huge network), finite weights, and (version 2)
    the fingerprint. Version 1 files load with an :class:`UnverifiedCheckpointWarning`.
    """
    name = repr(os.fspath(path))
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint {name} does not exist")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:  # weights_only refused a global: pickled code
        found = _refused_global(str(exc))
        raise ValueError(
            f"checkpoint {name} holds pickled code or objects{found}, not only weights, and is "
            "refused (nothing in it was run)"
        ) from None
    except Exception as exc:  # torch raises many types for a corrupt file
        raise ValueError(
            f"checkpoint {name} is truncated, corrupt or not a torch file: {exc}"
        ) from exc
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint {name} is not a {CHECKPOINT_FORMAT} checkpoint")
    version = data.get("version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"checkpoint {name} has version {version!r}; this code reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )
    try:
        arch = check_arch(data.get("arch"))
        check_weights(data.get("model"), arch)
    except ValueError as exc:
        raise ValueError(f"checkpoint {name}: {exc}") from exc
    if version == 1:
        warnings.warn(
            f"checkpoint {name} is format version 1: it has no fingerprint, so changes to its "
            f"architecture or weights cannot be detected (re-save it to upgrade it)",
            UnverifiedCheckpointWarning,
            stacklevel=2,
        )
    elif data.get("fingerprint") != fingerprint(data):
        raise ValueError(
            f"checkpoint {name} fails its integrity check: its contents (architecture, "
            f"settings or weights) were changed after it was written"
        )
    return data  # data["arch"] as written: check_arch() fills keys older files lack


def model_from_checkpoint(data: Checkpoint, path: str | os.PathLike[str]) -> ActorCritic:
    """Build the model of a loaded checkpoint; ValueError (naming ``path``) on a mismatch.
    The arch and the weights are checked against each other before the model is built."""
    try:
        arch = check_arch(data["arch"])
        weights = check_weights(data["model"], arch)
        model = build_model(arch)
        model.load_state_dict(weights)
    except (KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(f"checkpoint {os.fspath(path)!r} does not fit this model: {exc}") from exc
    return model
