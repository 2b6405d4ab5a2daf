"""Game records in JSON Lines files: checked on the way in and out, streamed.

The format (:func:`game_record`) is :mod:`butifarra_env.records.format`; replaying a record
is :mod:`butifarra_env.records.replay` (on :class:`~butifarra_env.core.game.Game`) and
:mod:`butifarra_env.envs.replay` (on ``butifarra_v0.raw_env``, for observations).

Files are JSON Lines, one record per line, read and written as streams: :func:`iter_records`
yields one record at a time (files larger than memory are fine) and reports a bad line by
its number (or skips it and says so); :func:`append_records` adds lines at the end without
reading or rewriting the file; :func:`save_records` writes a new file atomically and never
replaces an existing one unless asked. Every record is checked before it is written, so a
file the project wrote is a file it can read back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from butifarra_env.core import json_input
from butifarra_env.core.errors import RecordError
from butifarra_env.core.fileio import atomic_writer
from butifarra_env.records.format import ENV_NAME, FORMAT_VERSION, REQUIRED_KEYS, game_record

__all__ = [
    "FORMAT_VERSION",
    "RecordError",
    "append_records",
    "check_record",
    "check_record_file",
    "game_record",
    "iter_records",
    "load_records",
    "save_records",
]


def _parse_line(raw: bytes) -> Any:
    """One line of a records file as JSON, within the limits of
    :func:`butifarra_env.core.json_input.loads` (a byte-order mark at the start is fine)."""
    try:
        return json_input.loads(raw)
    except json_input.JSONInputError as e:
        raise RecordError(str(e)) from None


def check_record(record: object) -> dict[str, Any]:
    """Check what can be checked without replaying: a dict with the required entries, the
    format version and env name this code reads, and plain JSON values (no NaN). Raises
    RecordError naming the entry; returns the record."""
    if not isinstance(record, dict):
        raise RecordError(f"a record must be a dict, got {type(record).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise RecordError(f"record is missing {missing}; a record needs {list(REQUIRED_KEYS)}")
    if type(record["format_version"]) is not int or record["format_version"] != FORMAT_VERSION:
        raise RecordError(
            f"record format_version {record['format_version']!r} is not supported "
            f"(this version reads {FORMAT_VERSION})"
        )
    if record.get("env", ENV_NAME) != ENV_NAME:
        raise RecordError(f"record entry 'env' is {record['env']!r}; this code reads {ENV_NAME!r}")
    if not isinstance(record["options"], dict):
        raise RecordError("record entry 'options' must be a dict of game options")
    _to_json(record)
    return record


def _to_json(record: dict[str, Any]) -> str:
    try:
        return json.dumps(record, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise RecordError(
            f"record is not plain JSON (no NaN, numpy values or objects): {e}"
        ) from None


def save_records(
    path: str | os.PathLike[str], records: Iterable[dict[str, Any]], *, overwrite: bool = False
) -> int:
    """Write records to a new JSON Lines file, atomically (a crash never leaves half a file;
    a bad record leaves no file). An existing file is kept unless ``overwrite=True``; to add
    to one, use :func:`append_records`. Returns how many records were written."""
    n = 0
    with atomic_writer(path, "w", overwrite=overwrite) as f:
        for record in records:
            f.write(_to_json(check_record(record)) + "\n")
            n += 1
    return n


def append_records(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> int:
    """Add records at the end of a JSON Lines file (created if missing), without reading or
    rewriting what is there. Every record is checked first, so a bad one adds nothing.
    Returns how many were added."""
    lines = [_to_json(check_record(r)) + "\n" for r in records]
    path = Path(path)
    check_record_file(path)
    with open(path, "ab") as f:
        if f.tell() and not _ends_with_newline(path):
            f.write(b"\n")  # a file cut mid-line: keep the new records on lines of their own
        f.write("".join(lines).encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    return len(lines)


def check_record_file(path: str | os.PathLike[str]) -> Path:
    """Check, before any work, that records can be appended to ``path``: not a directory, its
    folder exists (or can be made), and an existing file is a JSON Lines file of records (its
    first and last complete lines are read; the rest is not). Raises ValueError saying what
    is wrong."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; give a file name such as games.jsonl")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(
            f"cannot create the folder {str(parent)!r} for {str(path)!r}: {e}"
        ) from None
    if not os.access(parent, os.W_OK):
        raise ValueError(f"the folder {str(parent)!r} is not writable")
    if not path.exists():
        return path
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is not a regular file")
    if not os.access(path, os.W_OK):
        raise ValueError(f"{str(path)!r} is not writable")
    # The first line says whether this is a records file; the last one is checked too unless
    # it was cut short (no newline: a crash while writing), which appending leaves behind.
    cut = path.stat().st_size > 0 and not _ends_with_newline(path)
    for where, line in (("first", _first_line(path)), ("last", None if cut else _last_line(path))):
        if line is None:
            continue
        try:
            check_record(_parse_line(line))
        except RecordError as e:
            raise ValueError(
                f"{str(path)!r} exists and is not a JSON Lines file of game records "
                f"(its {where} line: {e}); choose another file"
            ) from None
    return path


def _first_line(path: Path) -> bytes | None:
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                return line
    return None


def _last_line(path: Path, chunk: int = 1 << 16) -> bytes | None:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        data = b""
        while end > 0:
            start = max(0, end - chunk)
            f.seek(start)
            data = f.read(end - start) + data
            end = start
            lines = [ln for ln in data.split(b"\n") if ln.strip()]
            if len(lines) > 1 or (lines and start == 0):
                return lines[-1]
    return None


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def iter_records(
    path: str | os.PathLike[str],
    *,
    skip_bad: bool = False,
    skipped: list[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSON Lines file one at a time (constant memory).

    A line that is not UTF-8, not JSON or not a record raises RecordError naming the file and
    line number; with ``skip_bad=True`` it is skipped instead, and its reason appended to
    ``skipped`` (when given) as ``"path:line: reason"``. Blank lines are ignored.
    """
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                record = check_record(_parse_line(raw))
            except RecordError as e:
                message = f"{path}:{n}: {e}"
                if not skip_bad:
                    raise RecordError(message) from None
                if skipped is not None:
                    skipped.append(message)
                continue
            yield record


def load_records(path: str | os.PathLike[str], *, skip_bad: bool = False) -> list[dict[str, Any]]:
    """All records of a JSON Lines file as a list (:func:`iter_records` streams instead)."""
    return list(iter_records(path, skip_bad=skip_bad))
