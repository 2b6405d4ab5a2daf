"""Writing files so that a reader (or a crash) never sees half of one: the one helper.

:func:`atomic_writer` writes to a temporary file beside the target and moves it into place
with ``os.replace`` only when everything was written; on any error (Ctrl-C included) the
temporary file is removed and the old file, if any, is untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

TEMP_SUFFIX = ".tmp"


@contextlib.contextmanager
def atomic_writer(
    path: str | os.PathLike[str], mode: str = "w", *, overwrite: bool = True
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``"w"`` text, ``"wb"`` bytes); on
    a clean exit it replaces ``path`` atomically. ``overwrite=False`` refuses (FileExistsError)
    when ``path`` exists, before anything is written."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    if not overwrite and path.exists():
        raise FileExistsError(f"{str(path)!r} exists; not overwriting it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, _default_mode())
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding, newline=None if encoding is None else "") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if not overwrite and path.exists():
            raise FileExistsError(f"{str(path)!r} appeared while writing; not overwriting it")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, *, overwrite: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_writer(path, "w", overwrite=overwrite) as f:
        f.write(text)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, overwrite: bool = True
) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_writer(path, "wb", overwrite=overwrite) as f:
        f.write(data)


def _default_mode() -> int:
    """0o666 less the process umask: what ``open()`` would have given the file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def check_can_create(path: str | os.PathLike[str]) -> None:
    """Refuse, before any work, an output ``path`` that cannot be written, by trying: a
    temporary file is created (and removed at once) in the nearest folder that exists on the
    way to ``path``. Permission bits are not enough (as root everything looks writable,
    ``/proc`` and ``/sys`` included). Raises ValueError naming the path and the reason; creates
    nothing that stays."""
    path = Path(path)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"cannot create {str(path)!r}: {str(folder)!r} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.", suffix=TEMP_SUFFIX)
    except OSError as e:
        raise ValueError(
            f"cannot create files in {str(folder)!r} (for {str(path)!r}): {e.strerror or e}"
        ) from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)
