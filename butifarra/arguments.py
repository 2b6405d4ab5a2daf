"""What the ``butifarra`` programs share about their arguments: the one-line error, the
argparse value types (naming what was typed and what is allowed) and the check that an output
file can be created without overwriting anything. The command and its programs use these."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path

from butifarra_env.core.fileio import check_can_create

EXIT_USAGE = 2
MAX_SEED = 2**32 - 1
"""Seeds on the command line: 0 to 2**32 - 1 (what ``play`` draws when none is given)."""
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,30}")
"""An integer as typed: ASCII digits only, short enough to convert (no 5,000-digit line)."""


def shown(text: str, limit: int = 40) -> str:
    """What the person typed, quoted (control characters escaped) and cut short."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: an integer from ``lo`` to ``hi``, typed in ASCII digits."""

    def parse(text: str) -> int:
        allowed = f"an integer from {lo} to {hi}"
        if not _INT_TEXT.fullmatch(text.strip()):
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {shown(text)}")
        value = int(text)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {value}")
        return value

    parse.__name__ = f"integer {lo}-{hi}"
    return parse


class CLIError(Exception):
    """A user mistake, reported as one line (exit status 2, or ``status``)."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def check_new_file(path: Path, argument: str, hint: str = "name") -> None:
    """Refuse, before any work and without creating anything, an output file that exists (it
    is never overwritten), is a folder, or cannot be created (a file where a folder should
    be, a folder not writable, a name the system refuses)."""
    try:
        if path.exists() or path.is_symlink():
            what = "a folder" if path.is_dir() else "a file"
            raise CLIError(
                f"argument {argument}: {str(path)!r} exists ({what}); not overwriting it: "
                f"choose another {argument} {hint}"
            )
        folder = path.parent
        while not folder.exists():  # the folders to create: the nearest existing one decides
            folder = folder.parent
        if not folder.is_dir():
            raise CLIError(
                f"argument {argument}: cannot create {str(path)!r}: {str(folder)!r} is a file, "
                "not a folder"
            )
        if not os.access(folder, os.W_OK | os.X_OK):
            raise CLIError(f"argument {argument}: the folder {str(folder)!r} is not writable")
        check_can_create(path)  # by trying: as root, /proc and /sys pass the access check
    except (OSError, ValueError) as e:  # a name too long, a NUL byte, ...
        raise CLIError(f"argument {argument}: cannot use {shown(str(path))}: {e}") from None
