"""The project's error types: each a ``ValueError`` so callers can catch bad input at once."""

from __future__ import annotations


class IllegalActionError(ValueError):
    """An action that is not legal in the current position (every engine and wrapper raises
    this one type, naming the action, the phase and the legal actions)."""


class RecordError(ValueError):
    """A game record that is malformed or holds an illegal move; the message names the entry."""
