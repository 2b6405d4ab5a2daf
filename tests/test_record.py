"""Game records: JSON round trip, JSON Lines files, and rejection of bad records."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from butifarra_env import butifarra_v0
from butifarra_env.envs.replay import replay
from butifarra_env.records import RecordError, load_records, save_records


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
        save_records(path, broken(), overwrite=True)
    assert len(load_records(path)) == 1  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["r.jsonl"]  # no temp file left


# ------------------------------------------------------------------ files: streams, checks
def test_iter_records_names_the_line_of_bad_bytes_and_can_skip_bad_lines(tmp_path) -> None:
    from butifarra_env.records import iter_records

    good = json.dumps(played_record(0))
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        (good + "\n").encode() + b"\xff\xfe broken\n" + b"[1, 2]\n" + (good + "\n").encode()
    )
    with pytest.raises(RecordError, match=r"mixed.jsonl:2: not UTF-8"):
        list(iter_records(path))
    skipped: list[str] = []
    records = list(iter_records(path, skip_bad=True, skipped=skipped))
    assert len(records) == 2
    assert [s.split(": ", 1)[0][-7:] for s in skipped] == ["jsonl:2", "jsonl:3"]
    assert "a record must be a dict" in skipped[1]


def test_save_records_refuses_what_it_could_not_read_back(tmp_path) -> None:
    rec = played_record(0)
    for bad, match in (
        ([1, 2], "must be a dict"),
        ({**rec, "result": {"x": float("nan")}}, "not plain JSON"),
        ({**rec, "dealer": np.int64(1)}, "not plain JSON"),
        ({**rec, "env": "other_v3"}, "'env' is 'other_v3'"),
    ):
        with pytest.raises(RecordError, match=match):
            save_records(tmp_path / "x.jsonl", [rec, bad])
        assert not (tmp_path / "x.jsonl").exists()  # nothing half-written


def test_save_records_never_replaces_an_existing_file(tmp_path) -> None:
    path = tmp_path / "mine.jsonl"
    save_records(path, [played_record(0)])
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="not overwriting"):
        save_records(path, [played_record(1)])
    assert path.read_bytes() == before


def test_append_adds_lines_in_place_without_rewriting(tmp_path) -> None:
    from butifarra_env.records import append_records, iter_records

    path = tmp_path / "games.jsonl"
    assert append_records(path, [played_record(0)]) == 1  # creates the file
    inode, before = path.stat().st_ino, path.read_bytes()
    with open(path, "ab") as f:
        f.write(b'{"cut": tr')  # a crash mid-line in some other writer
    assert append_records(path, [played_record(1), played_record(2)]) == 2
    assert path.stat().st_ino == inode and path.read_bytes().startswith(before)
    skipped: list[str] = []
    assert len(list(iter_records(path, skip_bad=True, skipped=skipped))) == 3
    assert len(skipped) == 1 and ":2:" in skipped[0]
    with pytest.raises(RecordError, match="must be a dict"):
        append_records(path, [played_record(3), "oops"])  # checked first: nothing added
    assert len(list(iter_records(path, skip_bad=True))) == 3


def test_check_record_file_refuses_directories_and_foreign_files(tmp_path) -> None:
    from butifarra_env.records import check_record_file

    with pytest.raises(ValueError, match="is a directory"):
        check_record_file(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("my thesis notes\n")
    with pytest.raises(ValueError, match="not a JSON Lines file of game records"):
        check_record_file(notes)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="cannot create the folder"):
        check_record_file(tmp_path / "file" / "sub" / "games.jsonl")
    assert check_record_file(tmp_path / "new" / "games.jsonl").parent.is_dir()


def test_replay_refuses_a_tampered_result() -> None:
    rec = played_record(4)
    rec["result"]["scores"] = [999, 0]
    with pytest.raises(RecordError, match="'result'.*is not what its moves give"):
        replay(rec)


def _peak_bytes(work) -> int:
    """The most memory Python allocated (tracemalloc) while ``work()`` ran."""
    import tracemalloc

    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_streaming_takes_the_same_memory_for_five_times_the_records(tmp_path) -> None:
    """Constant memory: reading five times as many records does not raise the peak, and the
    peak stays far below one record per line kept (about 9 KiB each once parsed) or the file
    read whole. Few records suffice (the peak of a stream does not depend on the count), and
    tracemalloc makes every parse slow, so the files are small; appending reads only the first
    and last lines, so it is measured on a large file."""
    from butifarra_env.records import append_records, iter_records

    line = (json.dumps(played_record(5), separators=(",", ":")) + "\n").encode()
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(line * 50)
    large.write_bytes(line * 250)
    # warm up first: what the first use caches is not part of the stream
    assert sum(1 for _ in iter_records(small)) == 50
    counts: list[int] = []

    def count(path):
        return lambda: counts.append(sum(1 for _ in iter_records(path)))

    peak_small, peak_large = _peak_bytes(count(small)), _peak_bytes(count(large))
    assert counts == [50, 250]
    kept = 250 * 9 * 2**10  # what keeping the parsed records would take
    assert peak_large < min(large.stat().st_size, kept) / 2, f"peak {peak_large} bytes"
    assert peak_large < 1.5 * peak_small + 32 * 2**10, (peak_small, peak_large)

    huge = tmp_path / "huge.jsonl"
    with open(huge, "wb") as f:
        for _ in range(50):
            f.write(line * 1000)  # ~45 MB
    size = huge.stat().st_size
    record = played_record(6)
    added = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    peak_append = _peak_bytes(lambda: append_records(huge, [record]))
    assert peak_append < 2**20, f"appending to {size} bytes took {peak_append} bytes"
    assert huge.stat().st_size == size + len(added)
    with open(huge, "rb") as f:
        f.seek(size)
        assert f.read() == added
