"""Reading JSON that someone else wrote, within limits: the one parser for every reader.

Python's ``json`` turns a line nested a thousand deep into ``RecursionError`` and an integer of
more than 4,300 digits into a bare ``ValueError``, neither naming what was wrong, and accepts
``NaN``. Records files, result cards, run settings and request bodies all come through
:func:`loads`, which refuses those with :class:`JSONInputError` (a ``ValueError``) saying which
limit was passed, so one hostile line is one clear error (or one skipped line), never a crash.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "JSONInputError", "loads"]

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects accepted (a game record needs 3)."""
MAX_INT_DIGITS = 40
"""Most digits in one integer (a 64-bit seed has 20)."""


class JSONInputError(ValueError):
    """JSON text that is malformed or beyond :data:`MAX_DEPTH` / :data:`MAX_INT_DIGITS`."""


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_LONG_NUMBER = re.compile(r"\d{" + str(MAX_INT_DIGITS + 1) + ",}")
_NOT_BRACKETS = {c: None for c in range(128) if chr(c) not in "[]{}"}


def _refuse_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a JSON number; plain finite numbers only")


def _deeper_than(skeleton: str, max_depth: int) -> bool:
    """Whether the brackets of valid JSON (strings removed) nest deeper than ``max_depth``:
    each pass deletes the innermost pairs, so ``max_depth`` passes empty any shallower text
    (C-speed string work, not a Python walk over the parsed value)."""
    brackets = skeleton.translate(_NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return False
        brackets = brackets.replace("[]", "").replace("{}", "")
    return bool(brackets)


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``text`` (str, or UTF-8 bytes with or without a byte-order mark) as JSON.

    Raises JSONInputError naming the problem: not UTF-8, not JSON (with the position), nested
    deeper than ``max_depth``, a number with more than :data:`MAX_INT_DIGITS` digits in a row,
    or NaN / Infinity.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise JSONInputError(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    elif text.startswith("\ufeff"):
        text = text[1:]
    skeleton = _STRINGS.sub('""', text)
    long_number = _LONG_NUMBER.search(skeleton)
    if long_number:
        digits = len(long_number.group())
        raise JSONInputError(f"a number has {digits} digits; at most {MAX_INT_DIGITS} are accepted")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except JSONInputError:
        raise
    except RecursionError:
        raise JSONInputError(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as e:
        where = f"line {e.lineno} column {e.colno}"
        raise JSONInputError(f"not valid JSON ({e.msg} at {where})") from None
    except ValueError as e:  # anything else the parser refuses
        raise JSONInputError(f"not valid JSON ({e})") from None
    if _deeper_than(skeleton, max_depth):
        raise JSONInputError(f"nested deeper than {max_depth} levels")
    return value
