"""Game records: a JSON-serialisable account of one hand, its replay, and JSON Lines files.

A record holds the deal (dealer, the four initial hands as card ids), every action as
``[seat, action]`` in order, the options and the match context, and the result once the
hand is over. :func:`replay` rebuilds the exact position, so every observation can be
reproduced from the record alone.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from butifarra_env.cards import cards_of
from butifarra_env.game import Game
from butifarra_env.options import Options

FORMAT_VERSION = 1
_REQUIRED = ("format_version", "options", "dealer", "hands", "actions")


class RecordError(ValueError):
    """A record that is malformed or holds an illegal move; the message names the entry."""


def game_record(game: Game) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "env": "butifarra_v0",
        "options": game.options.to_dict(),
        "dealer": game.dealer,
        "hands": [cards_of(h) for h in game.initial_hands],
        "hand_number": game.hand_number,
        "match_scores": list(game.match_scores),
        "actions": [[s, a] for s, a in game.actions],
        "result": game.result(),
    }


def replay(record: dict[str, Any], render_mode: str | None = None, reward_scale: float = 1.0):
    """A ``raw_env`` at the position after every action of ``record`` (validated on the way).

    Raises RecordError naming the entry that is malformed or illegal.
    """
    *_, env = iter_replay(record, render_mode=render_mode, reward_scale=reward_scale)
    return env


def iter_replay(
    record: dict[str, Any], render_mode: str | None = None, reward_scale: float = 1.0
) -> Iterator[Any]:
    """Yield the ``raw_env`` before the first action and after each action (the same object,
    advanced in place), for comparing observations step by step."""
    from butifarra_env.env import raw_env

    if not isinstance(record, dict):
        raise RecordError(f"a record must be a dict, got {type(record).__name__}")
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise RecordError(f"record is missing {missing}; a record needs {list(_REQUIRED)}")
    if record["format_version"] != FORMAT_VERSION:
        raise RecordError(
            f"record format_version {record['format_version']!r} is not supported "
            f"(this version reads {FORMAT_VERSION})"
        )
    try:
        options = Options.from_dict(dict(record["options"]))
    except (TypeError, ValueError) as e:
        raise RecordError(f"record entry 'options': {e}") from None
    env = raw_env(render_mode=render_mode, reward_scale=reward_scale, **options.to_dict())
    try:
        env.reset(
            options={
                "dealer": record["dealer"],
                "hands": record["hands"],
                "hand_number": record.get("hand_number", 0),
                "match_scores": record.get("match_scores", [0, 0]),
            }
        )
    except (TypeError, ValueError) as e:
        raise RecordError(f"record deal ('dealer'/'hands'/match context): {e}") from None
    env._stop_at_hand_end = True  # a record is one hand: do not deal the next one of a match
    hand = env.game
    yield env
    actions = record["actions"]
    if not isinstance(actions, list):
        raise RecordError("record entry 'actions' must be a list of [seat, action] pairs")
    for i, entry in enumerate(actions):
        if (
            not isinstance(entry, (list, tuple))
            or len(entry) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in entry)
        ):
            raise RecordError(f"record entry actions[{i}] = {entry!r} is not a [seat, action] pair")
        seat, action = entry
        game = hand
        if game.is_over:
            raise RecordError(f"record entry actions[{i}] = {entry!r}: the hand is already over")
        if seat != game.to_move:
            raise RecordError(
                f"record entry actions[{i}] = {entry!r}: seat {seat} is not to move "
                f"(player_{game.to_move} is)"
            )
        try:
            env.step(action)
        except ValueError as e:
            raise RecordError(f"record entry actions[{i}] = {entry!r}: {e}") from None
        yield env


def save_records(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> None:
    """Write records as JSON Lines, atomically (a crash never leaves half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, separators=(",", ":")) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSON Lines file of records; a bad line raises RecordError with its number."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}:{n}: not valid JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise RecordError(f"{path}:{n}: a record must be a JSON object")
            out.append(record)
    return out
