"""Checks for everything a user hands the project: one place, used by every entry point.

Each check returns the value in its canonical type (numpy integers become ``int``) or raises
``ValueError`` naming the argument, what was given and what is allowed. Nothing is changed
before every check has passed, so a refused call leaves state as it was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.cards import ALL_CARDS, N_CARDS, N_TRICKS
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.rules import N_SEATS

RENDER_MODES = ("human", "ansi", "rgb_array")
OBS_FORMATS = ("uint8", "float32")
"""Observation formats: ``uint8`` (the raw counts, the default) or ``float32`` in [0, 1]
(each entry times ``observation.scale_vector()``)."""


def _describe(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # e.g. an int too long to print (over 4,300 digits)
        text = f"<{type(value).__name__} too large to show>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def is_int(value: object) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(
    name: str, value: object, lo: int | None = None, hi: int | None = None, none_ok: bool = False
) -> Any:
    """``value`` as an ``int`` in ``[lo, hi]`` (None allowed when ``none_ok``)."""
    if value is None and none_ok:
        return None
    if (
        not is_int(value)
        or (lo is not None and value < lo)  # type: ignore[operator]
        or (hi is not None and value > hi)  # type: ignore[operator]
    ):
        if lo is not None and hi is not None:
            allowed = f"an int {lo}-{hi}"
        elif lo is not None:
            allowed = f"an int >= {lo}"
        else:
            allowed = "an int"
        if none_ok:
            allowed += " or None"
        raise ValueError(f"{name} must be {allowed}, got {_describe(value)}")
    return int(value)  # type: ignore[call-overload]


def check_bool(name: str, value: object) -> bool:
    """``value`` as a ``bool``: True or False (a numpy bool too); 1, "yes" and None are
    refused, so a misspelt switch is never read as on or off by accident."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {_describe(value)}")
    return bool(value)


def check_number(name: str, value: object, lo: float, lo_inclusive: bool = False) -> float:
    """``value`` as a finite ``float`` above ``lo`` (or at least ``lo``)."""
    ok = (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and math.isfinite(value)
        and (value >= lo if lo_inclusive else value > lo)
    )
    if not ok:
        rel = ">=" if lo_inclusive else ">"
        raise ValueError(f"{name} must be a finite number {rel} {lo:g}, got {_describe(value)}")
    return float(value)  # type: ignore[arg-type]


def check_action(action: object) -> int:
    """An action id as an ``int`` 0-55: a Python or numpy integer, or a 0-d integer array.

    Floats (even 48.0), bools, strings, None and sequences are refused with
    :class:`~butifarra_env.core.errors.IllegalActionError` (a ValueError); whether the id is legal
    in the position is the engine's check.
    """
    if isinstance(action, np.ndarray) and action.ndim == 0 and action.dtype.kind in "iu":
        action = action.item()
    if not is_int(action) or not 0 <= action < N_ACTIONS:  # type: ignore[operator]
        raise IllegalActionError(
            f"an action must be an int action id 0-{N_ACTIONS - 1}, got {_describe(action)}"
        )
    return int(action)  # type: ignore[call-overload]


def check_seed(value: object, name: str = "seed") -> int | None:
    """A seed: None or an int >= 0 (what numpy's generators accept)."""
    return check_int(name, value, 0, None, none_ok=True)


def check_render_mode(render_mode: object) -> str | None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(
            f"render_mode must be None or one of {list(RENDER_MODES)}, got {_describe(render_mode)}"
        )
    return render_mode


def check_obs_format(obs_format: object) -> str:
    """One of :data:`OBS_FORMATS`."""
    if not isinstance(obs_format, str) or obs_format not in OBS_FORMATS:
        raise ValueError(
            f"obs_format must be one of {list(OBS_FORMATS)}, got {_describe(obs_format)}"
        )
    return obs_format


def check_seat(value: object, name: str = "seat") -> int:
    """A seat 0-3."""
    return check_int(name, value, 0, N_SEATS - 1)


def check_reward_scale(reward_scale: object) -> float:
    return check_number("reward_scale", reward_scale, 0.0)


def check_deal(dealer: object, hands: object) -> tuple[int, list[int]]:
    """A fixed deal: a dealer seat and four lists of 12 card ids (each card once).

    Returns the dealer and the four hands as bitmasks.
    """
    d = check_int("dealer", dealer, 0, N_SEATS - 1)
    if (
        isinstance(hands, (str, bytes))
        or not isinstance(hands, (list, tuple, np.ndarray))
        or len(hands) != N_SEATS
    ):
        raise ValueError(f"hands must be four lists of 12 card ids (0-47), got {_describe(hands)}")
    masks = []
    for seat, cards in enumerate(hands):
        if isinstance(cards, (str, bytes)) or not isinstance(cards, (list, tuple, np.ndarray)):
            raise ValueError(f"hands[{seat}] must be a list of 12 card ids, got {_describe(cards)}")
        if not all(is_int(c) for c in cards):
            raise ValueError(f"hands[{seat}] must hold int card ids 0-47, got {_describe(cards)}")
        ids = [int(c) for c in cards]
        if len(ids) != N_TRICKS or any(not 0 <= c < N_CARDS for c in ids) or len(set(ids)) != 12:
            raise ValueError(f"hands[{seat}] must hold 12 distinct card ids 0-47, got {ids}")
        masks.append(sum(1 << c for c in ids))
    if masks[0] | masks[1] | masks[2] | masks[3] != ALL_CARDS:
        raise ValueError("hands: the four hands must hold each of the 48 cards exactly once")
    return d, masks


def check_reset_options(options: object) -> dict[str, Any]:
    """``reset(options=...)``: None or a mapping of option names (returned as a new dict)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(
            f"reset options must be a dict of option names (or None), got {_describe(options)}"
        )
    return dict(options)


def check_match_position(
    hand_number: object, match_scores: object, target_score: int | None = None
) -> tuple[int, tuple[int, int]]:
    """A match position to resume: hand number >= 0 and two team scores >= 0, below
    ``target_score`` when the match has one (a team at the target has already won)."""
    n = check_int("hand_number", hand_number, 0)
    if (
        isinstance(match_scores, (str, bytes))
        or not isinstance(match_scores, (list, tuple, np.ndarray))
        or len(match_scores) != 2
    ):
        raise ValueError(f"match_scores must be two ints >= 0, got {_describe(match_scores)}")
    a = check_int("match_scores[0]", match_scores[0], 0)
    b = check_int("match_scores[1]", match_scores[1], 0)
    if target_score is not None and max(a, b) >= target_score:
        raise ValueError(
            f"match_scores must both be below target_score {target_score} (a team that has "
            f"reached it has won the match), got {[a, b]}"
        )
    return n, (a, b)
