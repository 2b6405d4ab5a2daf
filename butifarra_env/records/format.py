"""The game-record format: a JSON-serialisable account of one hand (format version 1).

A record holds the deal (dealer, the four initial hands as card ids), every action as
``[seat, action]`` in order, the options and the match context, and the result once the hand
is over. The options are :meth:`Options.to_dict <butifarra_env.core.options.Options.to_dict>`:
the regional variants (``obligada``, ``linear_doubling``, ``butifarra_max_doubling_level``)
appear only when set, so a default game's record is byte for byte what earlier versions wrote,
and a record without them replays as the default game. :mod:`butifarra_env.records.files`
reads and writes JSON Lines files.
"""

from __future__ import annotations

from typing import Any

from butifarra_env.core.cards import cards_of
from butifarra_env.core.game import Game

FORMAT_VERSION = 1
ENV_NAME = "butifarra_v0"
REQUIRED_KEYS = ("format_version", "options", "dealer", "hands", "actions")


def game_record(game: Game) -> dict[str, Any]:
    """The hand of ``game`` (finished or not) as a record."""
    return {
        "format_version": FORMAT_VERSION,
        "env": ENV_NAME,
        "options": game.options.to_dict(),
        "dealer": game.dealer,
        "hands": [cards_of(h) for h in game.initial_hands],
        "hand_number": game.hand_number,
        "match_scores": list(game.match_scores),
        "actions": [[s, a] for s, a in game.actions],
        "result": game.result(),
    }
