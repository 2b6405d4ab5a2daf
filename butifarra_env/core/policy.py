"""What a player is, as types: anything that maps a seat's observation and mask to an action.

The environments take opponents of these types; :class:`agents.base.Agent` implements
:class:`Policy`. Protocols, so that an outside object qualifies without inheriting anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

PolicyFn = Callable[[np.ndarray, np.ndarray], int]
"""A plain function ``(observation, action_mask) -> action``."""


@runtime_checkable
class Policy(Protocol):
    """``act(observation uint8 (491,), action_mask int8 (56,)) -> action id``."""

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int: ...


@runtime_checkable
class BatchPolicy(Protocol):
    """``act_batch(observations (N, 491), action_masks (N, 56)) -> int64 (N,)``."""

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray: ...


def is_policy(obj: object) -> bool:
    """A :class:`Policy` or a callable :data:`PolicyFn`."""
    return isinstance(obj, Policy) or callable(obj)


def seat_policies(
    opponents: Any, seat: int, accepts: Callable[[object], bool], needs: str
) -> dict[int, Any]:
    """The policy of each seat but ``seat``: ``opponents`` is None (uniformly random legal
    play), one policy for all three, three policies (the other seats in ascending order) or a
    mapping seat -> policy. ``accepts`` says what counts as a policy, ``needs`` describes it
    in the error message."""
    others = [s for s in range(4) if s != seat]
    if opponents is None or accepts(opponents):
        return dict.fromkeys(others, opponents)
    if isinstance(opponents, (str, bytes)):
        raise ValueError(
            f"opponents must be None, a policy, three of them or a mapping seat -> policy, "
            f"got the string {opponents!r}; for an agent by name use "
            f"agents.make_agent({opponents!r})"
        )
    if isinstance(opponents, Mapping):
        if sorted(opponents) != others:
            raise ValueError(f"opponents mapping must have exactly the seats {others}")
        policies = dict(opponents)
    else:
        try:
            listed = list(opponents)
        except TypeError:
            raise ValueError(
                f"opponents must be None, a policy, three of them or a mapping seat -> policy, "
                f"got {opponents!r}"
            ) from None
        if len(listed) != 3:
            raise ValueError(
                f"opponents must be one policy or three (for seats {others}), got {len(listed)}"
            )
        policies = dict(zip(others, listed, strict=True))
    for s, p in policies.items():
        if p is not None and not accepts(p):
            raise ValueError(f"opponent for seat {s} must have {needs}, got {p!r}")
    return policies
