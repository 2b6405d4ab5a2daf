"""train.run_folder: the metrics CSV repair before a resume, the checkpoint rotation and
the refusals (the trainers' end-to-end faults are in test_training_faults.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.extras import need

need("torch")

from train.run_folder import (  # noqa: E402
    RunRefused,
    existing_run_files,
    newest_readable,
    repair_csv,
    save_rotating,
)

FIELDS = ("update", "loss", "eval")


def read(path: Path) -> tuple[list[str] | None, list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_repair_drops_torn_short_long_and_later_rows(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text(
        "update,loss,eval\r\n1,0.5,\r\n2,0.4\r\n3,0.3,1,extra\r\nx,0.2,\r\n4,0.1,2\r\n5,0.0,\r\n6,0.",
        newline="",
    )
    repair_csv(path, FIELDS, last=4)  # row 2 short, 3 long, x not a count, 5 later, 6 torn
    header, rows = read(path)
    assert header == list(FIELDS)
    assert rows == [
        {"update": "1", "loss": "0.5", "eval": ""},
        {"update": "4", "loss": "0.1", "eval": "2"},
    ]


def test_repair_adds_new_columns_and_a_fresh_start_empties_the_log(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("update,loss\n1,0.5\n2,0.4\n")
    repair_csv(path, FIELDS, last=2)
    assert read(path) == (
        list(FIELDS),
        [{"update": u, "loss": v, "eval": ""} for u, v in (("1", "0.5"), ("2", "0.4"))],
    )
    repair_csv(path, FIELDS, last=0)
    assert read(path) == (list(FIELDS), [])


def test_rotation_keeps_the_previous_and_sets_an_unreadable_newest_aside(tmp_path: Path) -> None:
    newest, previous = tmp_path / "checkpoint.pt", tmp_path / "checkpoint.prev.pt"
    save_rotating({"n": 1}, newest, previous)
    save_rotating({"n": 2}, newest, previous)
    import torch

    load = lambda p: torch.load(p, weights_only=True)  # noqa: E731
    assert (load(newest)["n"], load(previous)["n"]) == (2, 1)
    newest.write_bytes(b"torn")
    data, path, problems = newest_readable(newest, previous, lambda p: _strict(load, p))
    assert (data, path) == ({"n": 1}, previous) and len(problems) == 1
    kept = save_rotating({"n": 3}, newest, previous, newest_unreadable=True)
    assert kept == tmp_path / "checkpoint.pt.unreadable" and kept.read_bytes() == b"torn"
    assert (load(newest)["n"], load(previous)["n"]) == (3, 1)  # the good previous is kept
    previous.write_bytes(b"")
    newest.write_bytes(b"")
    with pytest.raises(RunRefused, match="no readable checkpoint"):
        newest_readable(newest, previous, lambda p: _strict(load, p))
    assert existing_run_files(tmp_path) == [
        "checkpoint.prev.pt", "checkpoint.pt", "checkpoint.pt.unreadable",
    ]  # fmt: skip


def _strict(load: object, path: Path) -> object:
    try:
        return load(path)  # type: ignore[operator]
    except Exception as exc:  # torch raises several kinds on a torn file
        raise ValueError(f"{path.name} is unreadable") from exc


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_paths_no_file_can_be_created_in_are_refused_by_trying(tmp_path: Path) -> None:
    """As root, ``os.access`` says /proc and /sys are writable: the checks create a probe."""
    from train.run_folder import check_export_path, check_writable_folder

    with pytest.raises(RunRefused, match=r"--export-path '/proc/x.pt' cannot be written"):
        check_export_path("/proc/x.pt", "run-id", [])
    with pytest.raises(RunRefused, match=r"run folder '/proc/run' cannot be used"):
        check_writable_folder(Path("/proc/run"), "run folder")
    with pytest.raises(RunRefused, match=r"cannot be used"):
        check_writable_folder(Path("/sys/kernel/run"), "run folder")
    # a folder that can be written passes, and the probe leaves nothing behind
    check_writable_folder(tmp_path / "new" / "run", "run folder")
    check_export_path(str(tmp_path / "x.pt"), "run-id", [])
    assert list(tmp_path.iterdir()) == []
