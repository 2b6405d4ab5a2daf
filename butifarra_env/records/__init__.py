"""Game records: the format, JSON Lines files, and replay on the rules core.

Above the rules core and below the environments: reading, writing and replaying records
loads no framework. ``butifarra_env.envs.replay`` replays through ``raw_env`` when the
observations are wanted.
"""

from butifarra_env.core.errors import RecordError
from butifarra_env.records.files import (
    append_records,
    check_record,
    check_record_file,
    iter_records,
    load_records,
    save_records,
)
from butifarra_env.records.format import FORMAT_VERSION, game_record
from butifarra_env.records.replay import iter_replay_games, replay_game

__all__ = [
    "FORMAT_VERSION",
    "RecordError",
    "append_records",
    "check_record",
    "check_record_file",
    "game_record",
    "iter_records",
    "iter_replay_games",
    "load_records",
    "replay_game",
    "save_records",
]
