"""Replaying a record through ``butifarra_v0.raw_env``, so that every observation of the hand
can be reproduced from the record alone (the checks are :mod:`butifarra_env.records.replay`'s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from butifarra_env.core.cards import cards_of
from butifarra_env.envs.aec import raw_env
from butifarra_env.records.replay import record_deal, replay_actions

__all__ = ["iter_replay", "replay"]


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
    advanced in place), for comparing observations step by step. After the last action the
    record's ``result`` (when it has one) must be what the moves produced."""
    options, dealer, hands, hand_number, scores = record_deal(record)
    env = raw_env(render_mode=render_mode, reward_scale=reward_scale, **options.to_dict())
    env.reset(
        options={
            "dealer": dealer,
            "hands": [cards_of(h) for h in hands],
            "hand_number": hand_number,
            "match_scores": list(scores),
            "one_hand": True,  # a record is one hand: do not deal the next one of a match
        }
    )
    yield env
    for _ in replay_actions(record, env.game, env.step):
        yield env
