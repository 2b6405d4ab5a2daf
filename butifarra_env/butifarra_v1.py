"""Butifarra as a PettingZoo AEC env whose observation also carries the trick history and the
regional variants. Everything not listed here is ``butifarra_v0``'s: read its docstring.

================  ===========================================================
Import            ``from butifarra_env import butifarra_v1``
Create            ``butifarra_v1.env(**options)`` (wrapped), ``butifarra_v1.raw_env(**options)``,
                  ``butifarra_v1.parallel_env(**options)``; the options of ``butifarra_v0``
Observation       ``Dict(observation=Box(0, 255, (638,), uint8),
                  action_mask=Box(0, 1, (56,), int8))``; with ``obs_format="float32"``,
                  ``observation=Box(0, 1, (638,), float32)``
State             ``state()`` as in ``butifarra_v0`` (639 values)
Gymnasium         ``gymnasium.make("butifarra_env/Butifarra-v1")``, ``gymnasium.make_vec(...)``
================  ===========================================================

Observation
    The 491 values of ``butifarra_v0``, unchanged and in place, followed by 147 more
    (``butifarra_env.core.observation.V1_FIELDS``, ``docs/observation_v1.md``): who led and
    who won each finished trick (``trick_led``, ``trick_won``: one 12-bit block per relative
    seat), the trick each card was played in (``card_trick``, 1-12, 0 not played) and the
    variants ``obligada``, ``linear_doubling`` and ``butifarra_max_doubling_level`` (the
    effective top level in a butifarra). ``obs[:491]`` is the v0 observation, so an agent that
    reads v0 reads a v1 vector's prefix; ``observation.decode(vec)`` names every field and
    rebuilds the tricks. ``obs_format="float32"`` scales with
    ``observation.layout(1).scale_vector()``. Opponent policies inside the Gymnasium wrappers
    get the v0 ``uint8`` observation (the shipped agents read v0).

Version history
    v0: initial release.
    v1: the observation adds the trick history and the variants; v0 unchanged.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv

from butifarra_env.core.observation import check_version
from butifarra_env.envs import aec, parallel

__all__ = ["env", "parallel_env", "raw_env"]

OBS_VERSION = 1


def _v1(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options with this version's observation, refusing a conflicting ``obs_version``."""
    if "obs_version" in kwargs and check_version(kwargs["obs_version"]) != OBS_VERSION:
        raise ValueError(
            f"butifarra_v1 observations are version {OBS_VERSION}, got obs_version="
            f"{kwargs['obs_version']!r}; use butifarra_v0 for version 0"
        )
    return {**kwargs, "obs_version": OBS_VERSION}


class raw_env(aec.raw_env):  # noqa: N801 - PettingZoo's naming convention for the bare env
    """The bare AEC env with the v1 observation: ``butifarra_v0.raw_env`` with
    ``obs_version=1`` (one code path; only the observation differs)."""

    metadata = {**aec.raw_env.metadata, "name": "butifarra_v1"}

    def __init__(
        self,
        render_mode: str | None = None,
        reward_scale: float = 1.0,
        obs_format: str = "uint8",
        **options: Any,
    ) -> None:
        super().__init__(render_mode, reward_scale, obs_format, **_v1(options))


def env(**kwargs: Any) -> AECEnv:
    """The wrapped env (``butifarra_v0.env``'s wrappers and illegal-move rule), v1 observation."""
    return aec.wrap(raw_env(**kwargs))


def parallel_env(**kwargs: Any) -> parallel.ButifarraParallelEnv:
    """The Parallel view (``butifarra_env.envs.parallel``) with the v1 observation."""
    return parallel.parallel_env(**_v1(kwargs))
