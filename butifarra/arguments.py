"""argparse value types shared by the ``butifarra`` programs: one line, naming what was typed
and what is allowed, for every bad number (the command and its programs use the same ones)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

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
