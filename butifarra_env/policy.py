"""What a player is, as types: anything that maps a seat's observation and mask to an action.

The environments take opponents of these types; :class:`agents.base.Agent` implements
:class:`Policy`. Protocols, so that an outside object qualifies without inheriting anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

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
