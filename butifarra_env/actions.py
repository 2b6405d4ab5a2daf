"""The 56 action ids of RULES.md, shared by every phase."""

from __future__ import annotations

from butifarra_env.cards import N_CARDS, SUIT_NAMES, card_name

N_ACTIONS = 56
TRUMP_BASE = 48  # 48 + suit: choose that suit as trump
BUTIFARRA = 52
DELEGATE = 53
DOUBLE = 54
PASS = 55

DOUBLING_NAMES = ("none", "contrar", "recontrar", "Sant Vicenç", "Verraca")

CARD_ACTIONS_MASK = (1 << N_CARDS) - 1
TRUMP_CHOICE_MASK = sum(1 << a for a in range(TRUMP_BASE, BUTIFARRA + 1))
DOUBLING_MASK = (1 << DOUBLE) | (1 << PASS)


def action_name(action: int) -> str:
    """Readable name, e.g. ``play 9o``, ``trump espadas``, ``butifarra``, ``double``."""
    if not isinstance(action, int) or not 0 <= action < N_ACTIONS:
        raise ValueError(f"action must be an int 0-55, got {action!r}")
    if action < N_CARDS:
        return f"play {card_name(action)}"
    if action < BUTIFARRA:
        return f"trump {SUIT_NAMES[action - TRUMP_BASE]}"
    return {BUTIFARRA: "butifarra", DELEGATE: "delegate", DOUBLE: "double", PASS: "pass"}[action]
