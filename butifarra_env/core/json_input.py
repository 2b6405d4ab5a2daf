"""Reading JSON that someone else wrote, within limits: the one parser for every reader.

Python's ``json`` turns a line nested a thousand deep into ``RecursionError`` and an integer of
more than 4,300 digits into a bare ``ValueError``, neither naming what was wrong, and accepts
``NaN``. Records files, result cards, run settings and request bodies all come through
:func:`loads`, which refuses those with :class:`JSONInputError` (a ``ValueError``) saying which
limit was passed, so one hostile line is one clear error (or one skipped line), never a crash.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "JSONInputError", "loads"]

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects accepted (a game record needs 3)."""
MAX_INT_DIGITS = 40
"""Most digits in one integer (a 64-bit seed has 20)."""


class JSONInputError(ValueError):
    """JSON text that is malformed or beyond :data:`MAX_DEPTH` / :data:`MAX_INT_DIGITS`."""


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise JSONInputError(
            f"an integer has {digits} digits; at most {MAX_INT_DIGITS} are accepted"
        )
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > 4 * MAX_INT_DIGITS:
        raise JSONInputError(f"a number has {len(text)} characters; at most {4 * MAX_INT_DIGITS}")
    return float(text)


def _refuse_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a JSON number; plain finite numbers only")


def _check_depth(value: Any, max_depth: int) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > max_depth:
                raise JSONInputError(f"nested deeper than {max_depth} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``text`` (str, or UTF-8 bytes with or without a byte-order mark) as JSON.

    Raises JSONInputError naming the problem: not UTF-8, not JSON (with the position), nested
    deeper than ``max_depth``, an integer longer than :data:`MAX_INT_DIGITS` digits, or NaN /
    Infinity.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise JSONInputError(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    elif text.startswith("\ufeff"):
        text = text[1:]
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
        )
    except JSONInputError:
        raise
    except RecursionError:
        raise JSONInputError(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as e:
        raise JSONInputError(
            f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    except ValueError as e:  # anything else the parser refuses
        raise JSONInputError(f"not valid JSON ({e})") from None
    _check_depth(value, max_depth)
    return value
