"""Game records: their replay and JSON Lines files.

The format (:func:`game_record`) is :mod:`butifarra_env.record_format`; :func:`replay`
rebuilds the exact position through ``butifarra_v0.raw_env``, so every observation can be
reproduced from the record alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from butifarra_env.env import raw_env
from butifarra_env.errors import RecordError
from butifarra_env.fileio import atomic_writer
from butifarra_env.options import Options
from butifarra_env.record_format import FORMAT_VERSION, REQUIRED_KEYS, game_record

__all__ = [
    "FORMAT_VERSION",
    "RecordError",
    "game_record",
    "iter_replay",
    "load_records",
    "replay",
    "save_records",
]


def replay(
    record: dict[str, Any], render_mode: str | None = None, reward_scale: float = 1.0
) -> raw_env:
    """A ``raw_env`` at the position after every action of ``record`` (validated on the way).

    Raises RecordError naming the entry that is malformed or illegal.
    """
    *_, env = iter_replay(record, render_mode=render_mode, reward_scale=reward_scale)
    return env


def iter_replay(
    record: dict[str, Any], render_mode: str | None = None, reward_scale: float = 1.0
) -> Iterator[raw_env]:
    """Yield the ``raw_env`` before the first action and after each action (the same object,
    advanced in place), for comparing observations step by step."""
    if not isinstance(record, dict):
        raise RecordError(f"a record must be a dict, got {type(record).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise RecordError(f"record is missing {missing}; a record needs {list(REQUIRED_KEYS)}")
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
                "one_hand": True,  # a record is one hand: do not deal the next one of a match
            }
        )
    except (TypeError, ValueError) as e:
        raise RecordError(f"record deal ('dealer'/'hands'/match context): {e}") from None
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
    with atomic_writer(path, "w") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")


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
