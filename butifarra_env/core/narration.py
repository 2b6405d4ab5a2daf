"""Actions in words: the one wording every program uses to say what a player did.

Terminal play, the web table's event log, the replay viewer and the demo narrate moves as
``<who>: <what>``; :func:`action_text` is the ``<what>``, the same everywhere: a card
played (``plays 9o (manilla de oros)``), the trump choice, butifarra, the delegation, each
doubling level by its Catalan name (``says contrar (multiplier x4)``) and the pass.
:func:`narrate` words the action a :class:`~butifarra_env.core.game.Game` just took.

(:func:`butifarra_env.core.actions.action_name` stays the short label of an action id,
``play 9o`` or ``double``, for lists of legal actions and error messages.)
"""

from __future__ import annotations

from butifarra_env.core.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    DOUBLING_NAMES,
    N_ACTIONS,
    PASS,
    TRUMP_BASE,
)
from butifarra_env.core.cards import N_CARDS, SUIT_NAMES, card_long_name, card_name
from butifarra_env.core.game import Game

__all__ = ["action_text", "narrate"]


def action_text(action: int, level: int, multiplier: int) -> str:
    """What ``action`` did, in words. ``level`` and ``multiplier`` are the doubling level
    and the hand's multiplier just after it (they name a double and price butifarra)."""
    if not isinstance(action, int) or not 0 <= action < N_ACTIONS:
        raise ValueError(f"action must be an int 0-{N_ACTIONS - 1}, got {action!r}")
    if action < N_CARDS:
        return f"plays {card_name(action)} ({card_long_name(action)})"
    if action < BUTIFARRA:
        return f"chooses trump {SUIT_NAMES[action - TRUMP_BASE]}"
    if action == BUTIFARRA:
        return f"sings butifarra (no trump, x{multiplier})"
    if action == DELEGATE:
        return "delegates to the partner"
    if action == DOUBLE:
        name = DOUBLING_NAMES[level] if 0 < level < len(DOUBLING_NAMES) else "double"
        return f"says {name} (multiplier x{multiplier})"
    assert action == PASS
    return "passes (bé)"


def narrate(game: Game, action: int) -> str:
    """:func:`action_text` of the action ``game`` has just taken (``game`` already stepped:
    its level and multiplier are those after the action)."""
    return action_text(int(action), game.level, game.multiplier)
