"""What the ``butifarra`` programs share about their arguments: the one-line error, the
argparse value types (naming what was typed and what is allowed), the check that an output
file can be created without overwriting anything, and the regional variants of RULES.md as
flags and in words (terminal play and the web table say them the same way). The command and
its programs use these."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from butifarra_env.core.actions import DOUBLING_NAMES
from butifarra_env.core.fileio import check_can_create
from butifarra_env.core.options import MAX_DOUBLING_LEVEL, Options
from butifarra_env.core.rules import NO_TRUMP, doubling_factor

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


# --------------------------------------------------------------------------- variants
def add_variant_arguments(parser: argparse.ArgumentParser) -> None:
    """The regional variants of RULES.md as flags (all off by default: the rules of RULES.md)."""
    group = parser.add_argument_group("variants (docs/RULES.md, Variants; default: off)")
    group.add_argument(
        "--obligada",
        action="store_true",
        help="obligada play: following suit under an opponent's card you cannot beat, play "
        "your lowest card of the led suit",
    )
    group.add_argument(
        "--linear-doubling",
        action="store_true",
        help="doubling multiplies by x1 x2 x3 x4 x5 along the chain instead of x1 x2 x4 x8 x16",
    )
    group.add_argument(
        "--butifarra-max-doubling",
        type=int_in(0, MAX_DOUBLING_LEVEL),
        default=None,
        metavar="LEVEL",
        help="top doubling level when butifarra is chosen, 0-4 (2: no Sant Vicenç in "
        "butifarra; default: the same as every contract)",
    )


def variant_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~butifarra_env.core.options.Options` keywords of the variant flags that
    were given (:func:`add_variant_arguments`); none for the default rules."""
    out: dict[str, Any] = {}
    if getattr(args, "obligada", False):
        out["obligada"] = True
    if getattr(args, "linear_doubling", False):
        out["linear_doubling"] = True
    if getattr(args, "butifarra_max_doubling", None) is not None:
        out["butifarra_max_doubling_level"] = args.butifarra_max_doubling
    return out


def variant_labels(options: Options) -> list[str]:
    """The variants ``options`` play, in words, in a fixed order (none for the default rules):
    ``obligada``, ``linear doubling``, ``butifarra: no Sant Vicenç`` (a cap of 2; ``butifarra:
    no doubling`` for 0). A variant that changes nothing (a cap at ``max_doubling_level``,
    linear doubling when no hand can go past contrar) is not listed."""
    labels = []
    if options.obligada:
        labels.append("obligada")
    top = options.max_doubling_level
    if options.linear_doubling and top >= 2:
        labels.append("linear doubling")
    cap = options.butifarra_max_doubling_level
    if cap is not None and cap < top:
        labels.append(
            "butifarra: no doubling" if cap == 0 else f"butifarra: no {DOUBLING_NAMES[cap + 1]}"
        )
    return labels


def multiplier_text(options: Options, trump: int, level: int) -> str:
    """The multiplier of a hand in ``trump`` at doubling ``level``, e.g. ``x8``; with linear
    doubling the factors too (``x6 (2 x 3, linear doubling)``), so the x3 is not read as a
    misprint of x4."""
    value = options.multiplier(trump, level)
    if not (options.linear_doubling and level >= 2):
        return f"x{value}"
    base = options.butifarra_base if trump == NO_TRUMP else 1
    return f"x{value} ({base} x {doubling_factor(level, True)}, linear doubling)"
