"""The 56 action ids of RULES.md, shared by every phase, and the legal-action masks.

Inside the engines the legal actions are one integer (bit ``a`` set when action ``a`` is
legal); agents receive them as an ``int8`` array of 56 zeros and ones. The conversions and
the uniform choice among legal actions live here, once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from butifarra_env.core.cards import N_CARDS, SUIT_NAMES, card_name

N_ACTIONS = 56
TRUMP_BASE = 48  # 48 + suit: choose that suit as trump
BUTIFARRA = 52
DELEGATE = 53
DOUBLE = 54
PASS = 55

DOUBLING_NAMES = ("none", "contrar", "recontrar", "Sant Vicenç", "Verraca")

CARD_ACTIONS_MASK = (1 << N_CARDS) - 1
TRUMP_CHOICE_MASK = sum(1 << a for a in range(TRUMP_BASE, BUTIFARRA + 1))
"""A suit (48-51) or butifarra (52): what the partner may answer after a delegation."""
DEALER_ACTIONS_MASK = TRUMP_CHOICE_MASK | (1 << DELEGATE)
DOUBLING_MASK = (1 << DOUBLE) | (1 << PASS)

_MASK_BYTES = (N_ACTIONS + 7) // 8


def action_name(action: int) -> str:
    """Readable name, e.g. ``play 9o``, ``trump espadas``, ``butifarra``, ``double``."""
    if not isinstance(action, int) or not 0 <= action < N_ACTIONS:
        raise ValueError(f"action must be an int 0-55, got {action!r}")
    if action < N_CARDS:
        return f"play {card_name(action)}"
    if action < BUTIFARRA:
        return f"trump {SUIT_NAMES[action - TRUMP_BASE]}"
    return {BUTIFARRA: "butifarra", DELEGATE: "delegate", DOUBLE: "double", PASS: "pass"}[action]


def mask_from_bits(legal: int) -> np.ndarray:
    """A legal-action integer as the ``int8`` (56,) mask agents receive (a fresh array)."""
    raw = np.frombuffer(legal.to_bytes(_MASK_BYTES, "little"), dtype=np.uint8)
    return np.unpackbits(raw, count=N_ACTIONS, bitorder="little").view(np.int8)


def masks_from_bits(legal: Sequence[int]) -> np.ndarray:
    """Several legal-action integers as an ``int8`` (N, 56) mask array."""
    raw = b"".join(x.to_bytes(_MASK_BYTES, "little") for x in legal)
    bits = np.unpackbits(
        np.frombuffer(raw, dtype=np.uint8).reshape(len(legal), _MASK_BYTES),
        axis=1,
        bitorder="little",
    )
    return bits[:, :N_ACTIONS].view(np.int8)


def bits_from_mask(action_mask: np.ndarray) -> int:
    """An action mask (any dtype, non-zero = legal) as the legal-action integer."""
    packed = np.packbits(np.asarray(action_mask) != 0, bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def bits_from_masks(action_masks: np.ndarray) -> list[int]:
    """:func:`bits_from_mask` of every row of an (N, 56) mask, in one numpy call."""
    packed = np.packbits(np.asarray(action_masks) != 0, axis=1, bitorder="little")
    raw, w = packed.tobytes(), packed.shape[1]
    return [int.from_bytes(raw[i * w : (i + 1) * w], "little") for i in range(len(packed))]


def random_legal_actions(action_masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random legal action per row of an (N, 56) mask, as ``int64`` (N,).

    The argmax of uniform noise restricted to the legal ids is uniform over them. Raises
    ValueError when a row has no legal action.
    """
    legal = np.asarray(action_masks) != 0
    if legal.ndim != 2:
        raise ValueError(f"action masks must have shape (N, {N_ACTIONS}), got {legal.shape}")
    if not legal.any(axis=1).all():
        row = int(np.flatnonzero(~legal.any(axis=1))[0])
        raise ValueError(f"row {row} of the action mask has no legal action")
    noise = rng.random(legal.shape)
    return np.where(legal, noise, -1.0).argmax(axis=1).astype(np.int64)
