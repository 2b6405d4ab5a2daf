"""Game records as step-by-step frames, and the replay viewer for Jupyter and static pages.

:func:`replay_data` replays a record through the engine
(:func:`butifarra_env.records.iter_replay_games`,
which checks every move) and takes a snapshot before the first move and after each one:
all four hands, the trick, the contract and the score. A frame after a move says it in
words (:mod:`butifarra_env.core.narration`, as the play table does). The seat to move in a
frame, its legal actions and, when the record carries them, the policy's probabilities (``"probs"``,
a list aligned with ``"actions"``: ``{action id as a string: probability}`` or null) belong
to the decision taken from that frame.

:class:`ReplayView` shows those frames: ``_repr_html_`` gives self-contained HTML (the
viewer's CSS and JS inlined, no server, no network), so a notebook cell holding a
``ReplayView`` shows the hand; :meth:`ReplayView.save` writes the same as a page. The web
server's replay page uses the same frames and the same script.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from importlib import resources
from pathlib import Path
from typing import Any

from butifarra.arguments import multiplier_text, variant_labels
from butifarra_env.core.actions import DOUBLING_NAMES, N_ACTIONS, action_name
from butifarra_env.core.cards import N_CARDS, POINTS, cards_of, sort_key
from butifarra_env.core.errors import RecordError
from butifarra_env.core.fileio import atomic_write_text
from butifarra_env.core.game import Game
from butifarra_env.core.narration import narrate
from butifarra_env.core.options import Options
from butifarra_env.core.rules import PHASE_NAMES, TRUMP_UNSET
from butifarra_env.core.validate import is_int
from butifarra_env.records import iter_records, iter_replay_games

__all__ = ["ReplayView", "check_probs", "record_summary", "replay_data", "viewer_assets"]

_STATIC = "static"
PROB_TOLERANCE = 1e-3
"""How far a decision's probabilities may sum from 1 (records round them)."""
ZERO_TOLERANCE = 1e-6
"""The most probability an action outside the legal set may carry (float noise)."""


def check_probs(record: dict[str, Any]) -> list[dict[str, float] | None] | None:
    """The record's ``"probs"`` as ``[{action id: probability} | None, ...]`` aligned with
    its actions, or None when it has none. Raises RecordError naming the bad entry."""
    probs = record.get("probs")
    if probs is None:
        return None
    actions = record.get("actions")
    if not isinstance(probs, list) or not isinstance(actions, list) or len(probs) != len(actions):
        n = len(actions) if isinstance(actions, list) else "?"
        raise RecordError(f"record entry 'probs' must be a list of {n} entries (one per action)")
    out: list[dict[str, float] | None] = []
    for i, entry in enumerate(probs):
        if entry is None:
            out.append(None)
            continue
        if not isinstance(entry, dict):
            raise RecordError(f"record entry probs[{i}] must be a dict or null, got {entry!r:.60}")
        row: dict[str, float] = {}
        for key, p in entry.items():
            a = _action_key(key)
            ok_p = isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p)
            if a is None or not ok_p or not 0 <= p <= 1 + ZERO_TOLERANCE:
                raise RecordError(
                    f"record entry probs[{i}] has {str(key)[:20]!r}: {p!r:.40}; entries are "
                    f"action ids 0-{N_ACTIONS - 1} mapped to probabilities 0-1"
                )
            row[str(a)] = float(p)
        total = math.fsum(row.values())
        if abs(total - 1) > PROB_TOLERANCE:
            raise RecordError(
                f"record entry probs[{i}] sums to {total:.6g}; a decision's probabilities "
                f"sum to 1 (within {PROB_TOLERANCE})"
            )
        out.append(row)
    return out


def _check_legal_probs(i: int, row: dict[str, float], legal: list[int]) -> None:
    """Refuse probability on an action that is not legal at the decision ``probs[i]``."""
    allowed = {str(a) for a in legal}
    for key, p in row.items():
        if key not in allowed and p > ZERO_TOLERANCE:
            raise RecordError(
                f"record entry probs[{i}] gives {p:.6g} to action {key} "
                f"({action_name(int(key))}), which is not legal there; legal: {legal}"
            )


def _action_key(key: object) -> int | None:
    if isinstance(key, str) and key.isascii() and key.isdigit():
        key = int(key)
    if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < N_ACTIONS:
        return key
    return None


def contract_state(game: Game) -> dict[str, Any]:
    """The contract and the running count, as the page shows them (every seat may see it):
    shared by the play table and the replay frames. ``rules`` names the regional variants
    the hand is played under (:func:`~butifarra.arguments.variant_labels`; empty for the
    rules of RULES.md), ``multiplier_text`` the multiplier with its factors under linear
    doubling (:func:`~butifarra.arguments.multiplier_text`)."""
    chosen = game.trump != TRUMP_UNSET
    return {
        "trump": None if game.trump == TRUMP_UNSET else game.trump,
        "chooser": game.chooser if game.chooser >= 0 else None,
        "delegated": game.delegated,
        "level": game.level,
        "level_name": DOUBLING_NAMES[game.level] if game.level else None,
        "multiplier": game.multiplier if chosen else None,
        "multiplier_text": (
            multiplier_text(game.options, game.trump, game.level) if chosen else None
        ),
        "rules": variant_labels(game.options),
        "team_points": list(game.team_points),
        "team_tricks": list(game.team_tricks),
    }


def _frame(game: Game, last: tuple[int, int] | None, probs: dict[str, float] | None) -> dict:
    """One snapshot: everything at this point of the hand, all hands visible."""
    trick = [c if c >= 0 else None for c in game.trick_cards]
    leader = game.trick_leader if game.trick_leader >= 0 else None
    trick_done = None
    if last is not None and last[1] < N_CARDS and game.cards_in_trick == 0:
        lead, cards, winner = game.tricks[-1]  # the card closed a trick: show all four
        trick, leader = list(cards), lead
        trick_done = {"winner": winner, "points": sum(POINTS[c] for c in cards) + 1}
    return {
        "hands": [sorted(cards_of(h), key=sort_key) for h in game.hands],
        "trick": trick,
        "trick_leader": leader,
        "trick_done": trick_done,
        "last": None
        if last is None
        else {"seat": last[0], "action": last[1], "text": narrate(game, last[1])},
        "phase": PHASE_NAMES[game.phase],
        "to_move": game.to_move if not game.is_over else None,
        "legal": game.legal_actions(),
        "probs": probs,
        **contract_state(game),
        "n_tricks": len(game.tricks),
    }


def replay_data(record: object) -> dict[str, Any]:
    """The record as frames for the viewer (validated by replaying it: RecordError, a
    ValueError, names the first bad entry; a record that is not a JSON object is refused the
    same way). Each decision's probabilities must be >= 0, sum to 1 and sit on legal moves."""
    if not isinstance(record, dict):
        raise RecordError(
            f"a record must be a JSON object (one line of a records file), "
            f"got {type(record).__name__}: {record!r:.40}"
        )
    probs = check_probs(record)
    actions = record.get("actions") or []
    frames = []
    game: Game | None = None
    for i, game in enumerate(iter_replay_games(record)):
        last = None if i == 0 else (actions[i - 1][0], actions[i - 1][1])
        decision = probs[i] if probs is not None and i < len(probs) else None
        if decision is not None:
            _check_legal_probs(i, decision, game.legal_actions())
        frames.append(_frame(game, last, decision))
    assert game is not None  # iter_replay_games yields the start position at least
    players = record.get("players")
    if not (isinstance(players, list) and len(players) == 4):
        players = [f"seat {s}" for s in range(4)]
    return {
        "players": [str(p)[:40] for p in players],
        "dealer": record["dealer"],
        "hand_number": record.get("hand_number", 0),
        "match_scores": record.get("match_scores", [0, 0]),
        "human_seat": record.get("human_seat"),
        "has_probs": probs is not None,
        "action_names": {str(a): action_name(a) for a in range(N_ACTIONS)},
        "frames": frames,
        "result": game.result(),
        "title": _title(record),
    }


def _title(record: dict[str, Any]) -> str:
    bits = []
    for key in ("source", "mode", "role", "deal"):  # never a seed: it may decide other deals
        if record.get(key) is not None:
            bits.append(f"{key} {record[key]}")
    return ", ".join(str(b)[:60] for b in bits)


def record_summary(index: int, record: dict[str, Any]) -> dict[str, Any]:
    """A line for a list of records: who played, the contract and the score (no replay)."""
    result = record.get("result") if isinstance(record.get("result"), dict) else {}
    players = record.get("players")
    return {
        "index": index,
        "players": [str(p)[:40] for p in players] if isinstance(players, list) else None,
        "dealer": record.get("dealer"),
        "deal": record.get("deal") if is_int(record.get("deal")) else None,
        "source": str(record.get("source", ""))[:40] or None,
        "mode": str(record.get("mode", ""))[:40] or None,
        "role": str(record.get("role", ""))[:40] or None,
        "trump": result.get("trump") if result else None,
        "multiplier": result.get("multiplier") if result else None,
        "scores": result.get("scores") if result else None,
        "n_actions": len(record["actions"]) if isinstance(record.get("actions"), list) else 0,
        "has_probs": isinstance(record.get("probs"), list),
        "rules": _record_rules(record),
    }


def _record_rules(record: dict[str, Any]) -> list[str]:
    """The variants a record's ``options`` name, in words (none when they are the default
    or not valid options: the list does not replay records, the viewer does and says why)."""
    try:
        return variant_labels(Options.from_dict(record.get("options") or {}))
    except (TypeError, ValueError):
        return []


# --------------------------------------------------------------------------- the viewer
def viewer_assets() -> dict[str, str]:
    """The CSS and scripts the viewer needs (package data), by file name."""
    root = resources.files("butifarra.web").joinpath(_STATIC)
    return {n: root.joinpath(n).read_text("utf-8") for n in ("table.css", "cards.js", "replay.js")}


def _script_json(data: object) -> str:
    """JSON that is safe inside a <script> element (no '</script>', no '<!--')."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class ReplayView:
    """A hand to step through, in a notebook or a saved page.

    ``ReplayView(record)`` checks the record by replaying it; ``ReplayView.from_file(path,
    index)`` takes the ``index``-th record of a JSON Lines file. In Jupyter the last
    expression of a cell shows it (``_repr_html_``): buttons or the arrow keys step through
    the moves, with all four hands, the trick, the score and, when the record has them, the
    policy's probabilities beside the legal moves.
    """

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.data = replay_data(record)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], index: int = 0) -> ReplayView:
        """The ``index``-th record (an int >= 0 below the number of records) of ``path``."""
        if not is_int(index) or index < 0:
            raise ValueError(
                f"index must be an int >= 0 (below the number of records), got {index!r:.40}"
            )
        n = 0
        for n, record in enumerate(iter_records(path), start=1):
            if n - 1 == index:
                return cls(record)
        raise ValueError(
            f"index must be an int from 0 to the number of records - 1; {str(path)!r} has "
            f"{n} records (fewer than {index + 1}), got index {index}"
        )

    def __repr__(self) -> str:
        n = len(self.data["frames"]) - 1
        return f"ReplayView({n} moves, players {self.data['players']})"

    def to_html(self) -> str:
        """A self-contained fragment: a styled element and the script that fills it."""
        assets = viewer_assets()
        uid = "bt-replay-" + secrets.token_hex(6)
        return (
            f'<div class="bt bt-embed"><style>{assets["table.css"]}</style>'
            f'<div id="{uid}" class="bt-replay" tabindex="0">'
            "(the replay viewer needs JavaScript)</div>"
            f"<script>{assets['cards.js']}\n{assets['replay.js']}\n"
            f"ButifarraReplay.mount(document.getElementById({json.dumps(uid)}), "
            f"{_script_json(self.data)});</script></div>"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def page(self) -> str:
        """A whole HTML page holding :meth:`to_html`."""
        return (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            "<title>Butifarra replay</title></head>"
            f'<body class="bt-standalone">{self.to_html()}</body></html>\n'
        )

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write :meth:`page` to ``path`` atomically (an existing file is kept unless
        ``overwrite``)."""
        atomic_write_text(path, self.page(), overwrite=overwrite)
        return Path(path)
