"""Game records: JSON round trip, JSON Lines files, and rejection of bad records."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from butifarra_env import butifarra_v0
from butifarra_env.record import RecordError, load_records, replay, save_records


def played_record(seed: int = 0, **options: object) -> dict:
    env = butifarra_v0.raw_env(**options)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while not all(env.terminations.values()):
        legal = env.legal_actions()
        env.step(legal[rng.integers(len(legal))])
    return env.game_record()


def test_record_has_the_deal_actions_options_and_result() -> None:
    rec = played_record(1)
    json.dumps(rec)  # serialisable as it is
    assert set(rec) >= {"dealer", "hands", "actions", "options", "result"}
    assert sorted(c for h in rec["hands"] for c in h) == list(range(48))
    assert sum(1 for _, a in rec["actions"] if a < 48) == 48
    assert rec["result"]["team_points"][0] + rec["result"]["team_points"][1] == 72


def test_replay_rebuilds_the_exact_state(tmp_path) -> None:
    recs = [played_record(s, max_doubling_level=s % 5) for s in range(5)]
    path = tmp_path / "games.jsonl"
    save_records(path, recs)
    loaded = load_records(path)
    assert loaded == json.loads(json.dumps(recs))
    for rec in loaded:
        env = replay(rec)
        assert env.game_record() == rec


def test_replay_of_a_partial_record_stops_at_that_position() -> None:
    rec = played_record(3)
    rec["actions"] = rec["actions"][:10]
    rec["result"] = None
    env = replay(rec)
    assert len(env.game.actions) == 10 and not env.game.is_over


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda r: r.pop("hands"), "missing"),
        (lambda r: r.__setitem__("format_version", 99), "format_version"),
        (lambda r: r["options"].__setitem__("butifarra_base", 5), "options"),
        (lambda r: r["hands"][0].__setitem__(0, r["hands"][1][0]), "hands"),
        (lambda r: r["actions"].__setitem__(3, "x"), r"actions\[3\]"),
        (
            lambda r: r["actions"][0].__setitem__(0, (r["actions"][0][0] + 1) % 4),
            r"actions\[0\].*not to move",
        ),
        (lambda r: r["actions"][0].__setitem__(1, 0), r"actions\[0\].*illegal action 0"),
        (lambda r: r["actions"].append([0, 55]), "already over"),
    ],
)
def test_bad_records_are_rejected_naming_the_entry(mutate, match: str) -> None:
    rec = copy.deepcopy(played_record(2))
    mutate(rec)
    with pytest.raises(RecordError, match=match):
        replay(rec)


def test_load_records_reports_the_bad_line(tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(played_record(0)) + "\n{not json\n")
    with pytest.raises(RecordError, match=r"bad.jsonl:2"):
        load_records(path)


def test_save_records_is_atomic(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    save_records(path, [played_record(0)])

    def broken():
        yield played_record(1)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_records(path, broken())
    assert len(load_records(path)) == 1  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["r.jsonl"]  # no temp file left
