"""Replaying a record on :class:`~butifarra_env.core.game.Game`: every action checked, the
stored result compared with what the moves give. No framework is loaded, so records replay
wherever the rules core runs; :mod:`butifarra_env.envs.replay` drives ``raw_env`` with the
same checks when observations are wanted."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from butifarra_env.core.errors import RecordError
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.validate import check_deal, check_match_position
from butifarra_env.records.files import check_record

__all__ = ["Deal", "iter_replay_games", "record_deal", "replay_actions", "replay_game"]

Deal = tuple[Options, int, list[int], int, tuple[int, int]]


def record_deal(record: dict[str, Any]) -> Deal:
    """The record's options, dealer, hands (bitmasks) and match context, each checked.
    Raises RecordError naming the entry that is wrong."""
    check_record(record)
    try:
        options = Options.from_dict(dict(record["options"]))
    except (TypeError, ValueError) as e:
        raise RecordError(f"record entry 'options': {e}") from None
    try:
        dealer, hands = check_deal(record["dealer"], record["hands"])
        hand_number, scores = check_match_position(
            record.get("hand_number", 0), record.get("match_scores", [0, 0])
        )
    except (TypeError, ValueError) as e:
        raise RecordError(f"record deal ('dealer'/'hands'/match context): {e}") from None
    return options, dealer, hands, hand_number, scores


def replay_actions(
    record: dict[str, Any], game: Game, step: Callable[[int], object]
) -> Iterator[None]:
    """Apply the record's actions through ``step`` (which advances ``game``), yielding after
    each; every entry is checked against ``game`` first, and after the last one the stored
    ``result`` (when there is one) must be what the moves produced."""
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
        if game.is_over:
            raise RecordError(f"record entry actions[{i}] = {entry!r}: the hand is already over")
        if seat != game.to_move:
            raise RecordError(
                f"record entry actions[{i}] = {entry!r}: seat {seat} is not to move "
                f"(player_{game.to_move} is)"
            )
        try:
            step(action)
        except ValueError as e:
            raise RecordError(f"record entry actions[{i}] = {entry!r}: {e}") from None
        yield
    stored = record.get("result")
    if stored is not None and stored != game.result():
        raise RecordError(
            f"record entry 'result' = {stored!r} is not what its moves give: {game.result()!r}"
        )


def iter_replay_games(record: dict[str, Any]) -> Iterator[Game]:
    """Yield the :class:`Game` before the first action and after each action (the same
    object, advanced in place). Raises RecordError naming the entry that is malformed or
    illegal."""
    options, dealer, hands, hand_number, scores = record_deal(record)
    game = Game(options, dealer, hands, hand_number, scores)
    yield game
    for _ in replay_actions(record, game, game.step):
        yield game


def replay_game(record: dict[str, Any]) -> Game:
    """The :class:`Game` after every action of ``record`` (validated on the way)."""
    *_, game = iter_replay_games(record)
    return game
