"""The one interface every agent implements: :class:`Agent`, and :func:`check_batch`.

An agent sees exactly what a player sees: the observation vector of its seat
(:data:`butifarra_env.core.observation.OBS_SIZE` ``uint8`` values of ``butifarra_v0``, or
the 638 of ``butifarra_v1`` for an agent whose :attr:`Agent.obs_version` is 1) and the action
mask (``int8`` of 56). It never gets the :class:`~butifarra_env.core.game.Game`, so the arena,
the environment and PPO self-play can all drive any agent the same way.

``Agent`` is a :class:`butifarra_env.core.policy.Policy` and a
:class:`~butifarra_env.core.policy.BatchPolicy` (the types the environments accept), plus a
``name``, a ``reset(seed)`` hook and :meth:`Agent.set_options`. Building agents by name is
:mod:`agents.registry`.

The regional variants of RULES.md (obligada, linear doubling, a doubling cap in butifarra)
are not in the v0 observation (v1 carries them): whoever seats an agent tells it the game's options
(:meth:`Agent.set_options`; the table driver does, :mod:`agents.table`), and an agent that
cannot play a variant refuses there, before any move (:class:`UnsupportedVariant`), rather
than playing on silently under rules it does not know.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping

import numpy as np

from butifarra_env.core.actions import N_ACTIONS
from butifarra_env.core.observation import layout
from butifarra_env.core.options import VARIANT_DEFAULTS, Options

__all__ = [
    "VARIANTS",
    "Agent",
    "UnsupportedVariant",
    "check_batch",
    "check_one",
    "obs_version_of",
    "trained_variants",
    "variants_in_play",
]

VARIANTS: frozenset[str] = frozenset(VARIANT_DEFAULTS)
"""The names of the regional variants (the options of
:data:`butifarra_env.core.options.VARIANT_DEFAULTS`): ``obligada``, ``linear_doubling``,
``butifarra_max_doubling_level``."""


def variants_in_play(options: Options) -> tuple[str, ...]:
    """The variants that change the game under ``options``, in the order of RULES.md:
    ``obligada`` when on; ``linear_doubling`` when on and a hand can reach level 2 (x1 and x2
    are the same either way); ``butifarra_max_doubling_level`` when it is below
    ``max_doubling_level`` (None, or equal, changes nothing)."""
    out = []
    if options.obligada:
        out.append("obligada")
    if options.linear_doubling and options.max_doubling_level >= 2:
        out.append("linear_doubling")
    cap = options.butifarra_max_doubling_level
    if cap is not None and cap < options.max_doubling_level:
        out.append("butifarra_max_doubling_level")
    return tuple(out)


def describe_variant(name: str, options: Options) -> str:
    """A variant in words, for messages (``obligada play``, ``linear doubling``...)."""
    if name == "obligada":
        return "obligada play (obligada=True)"
    if name == "linear_doubling":
        return "linear doubling (linear_doubling=True)"
    cap = options.butifarra_max_doubling_level
    return f"a doubling cap in butifarra (butifarra_max_doubling_level={cap})"


def trained_variants(config: Mapping[str, object] | None) -> frozenset[str]:
    """The variants a checkpoint was trained under, from its training ``config``: those in
    play (:func:`variants_in_play`) under ``config["options"]`` (an
    :meth:`~butifarra_env.core.options.Options.to_dict`); none when the config has no
    ``options`` (every checkpoint trained before the variants existed, the shipped ones
    included). An ``options`` entry that is not valid options is refused (ValueError)."""
    if not config or config.get("options") is None:
        return frozenset()
    data = config["options"]
    if not isinstance(data, dict):
        raise ValueError(
            f"the checkpoint's config 'options' must be a dict of game options, got "
            f"{type(data).__name__}"
        )
    return frozenset(variants_in_play(Options.from_dict(data)))


class UnsupportedVariant(ValueError):
    """An agent was told options with a variant it cannot play (:meth:`Agent.set_options`).

    The message names the agent, the variant(s) and why; :attr:`agent` and
    :attr:`variants` hold them for programs."""

    def __init__(self, agent: str, variants: Iterable[str], message: str) -> None:
        super().__init__(message)
        self.agent = agent
        self.variants = tuple(variants)

    def __reduce__(self) -> tuple[type, tuple[str, tuple[str, ...], str]]:  # picklable
        return (type(self), (self.agent, self.variants, str(self)))


class Agent(abc.ABC):
    """A player: observation + legal-action mask in, action id out."""

    name: str = "agent"
    supported_variants: frozenset[str] = VARIANTS
    """The variants (:data:`VARIANTS`) this agent can play. Every one by default: an agent
    that picks among the legal actions of its mask is legal under any rules. An agent that
    learned or models the rules narrows it (a PPO checkpoint: the variants it was trained
    under, :func:`trained_variants`)."""
    variants_hint: str = ""
    """What to do instead, added to the refusal (e.g. which agents can play it)."""
    options: Options | None = None
    """The options of the game the agent is seated at, as last told by
    :meth:`set_options`; None until then (the rules of the observation, no variant)."""
    obs_version: int = 0
    """The observation version the agent reads: 0 (``butifarra_v0``, 491 values) or 1
    (``butifarra_v1``, 638: v0 then the trick history and the variants). The table driver
    and the arena hand each agent its own version."""

    def set_options(self, options: Options) -> None:
        """Be told the options of the game about to be played (before its first decision).

        Raises :class:`UnsupportedVariant` (a ValueError) naming the agent and the variant
        when a variant in play (:func:`variants_in_play`) is not in
        :attr:`supported_variants`; nothing changes then. The default keeps ``options`` in
        :attr:`options`; agents that simulate the rules (the search agent) read it there.
        """
        if not isinstance(options, Options):
            raise TypeError(
                f"set_options takes butifarra_env.core.options.Options, got "
                f"{type(options).__name__}"
            )
        missing = [v for v in variants_in_play(options) if v not in self.supported_variants]
        if missing:
            words = " and ".join(describe_variant(v, options) for v in missing)
            hint = f"; {self.variants_hint}" if self.variants_hint else ""
            raise UnsupportedVariant(
                self.name,
                missing,
                f"agent {self.name!r} cannot play {words}: it supports "
                f"{_listed(self.supported_variants)}{hint}",
            )
        self.options = options

    @abc.abstractmethod
    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        """One legal action id for one observation (``uint8`` (491,)) and mask (``int8`` (56,))."""

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """Actions for a batch (``(N, 491)``, ``(N, 56)``) as ``int64`` ``(N,)``.

        The default loops over :meth:`act`; agents with a vectorised policy override it.
        """
        obs, masks = check_batch(observations, action_masks)
        return np.fromiter(
            (self.act(obs[i], masks[i]) for i in range(len(obs))), dtype=np.int64, count=len(obs)
        )

    def action_probs_batch(
        self, observations: np.ndarray, action_masks: np.ndarray
    ) -> np.ndarray | None:
        """The policy's probabilities over the 56 actions for a batch (``float`` ``(N, 56)``,
        0 on illegal actions, rows summing to 1), or None for an agent without a policy
        distribution (the default). Optional; the arena logs them with ``records_path``.

        It must not change the agent's state (no random draws), so that asking for the
        probabilities never changes what the agent plays.
        """
        return None

    def reset(self, seed: int | None = None) -> None:  # noqa: B027 - optional hook
        """Reseed (and forget any per-hand state); deterministic agents ignore it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def obs_version_of(agent: object) -> int:
    """The observation version ``agent`` reads: its :attr:`Agent.obs_version`, 0 for a
    policy that does not say (any ``act_batch`` callable the environments accept)."""
    return getattr(agent, "obs_version", 0)


def _range_tables(version: int) -> tuple[np.ndarray, np.ndarray]:
    scale = layout(version).scale_vector()
    return np.rint(1.0 / scale.astype(np.float64)).astype(np.int64), scale


_RANGES = {v: _range_tables(v) for v in (0, 1)}
"""Per observation version: each entry's largest value, and the float32 format's scale."""


def _canonical_observations(obs: np.ndarray, version: int) -> np.ndarray:
    """``uint8`` observations, from the ``uint8`` format or the documented ``float32`` one
    (``uint8_obs * scale_vector()``); anything else is refused, naming what was wrong."""
    field_max, scale = _RANGES[version]
    kind = obs.dtype.kind
    if kind == "u" and obs.dtype.itemsize == 1:
        counts = obs
    elif kind in "iu":
        if obs.size and (obs.min() < 0 or obs.max() > 255):
            raise ValueError(
                "observations must hold the counts of butifarra_env.core.observation "
                f"(0-255), got values from {obs.min()} to {obs.max()}"
            )
        counts = obs.astype(np.uint8)
    elif kind == "f":
        if obs.size and not (np.isfinite(obs).all() and obs.min() >= 0.0 and obs.max() <= 1.0):
            raise ValueError(
                "float observations must be the obs_format='float32' ones, every entry in "
                "[0, 1] (uint8 observation * scale_vector())"
            )
        counts = np.rint(obs / scale).astype(np.uint8)
        if not np.allclose(counts * scale, obs, rtol=0.0, atol=1e-4):
            raise ValueError(
                "float observations must be uint8 observations * scale_vector() "
                "(obs_format='float32'); these are not"
            )
    else:
        raise ValueError(
            f"observations must be uint8 (or obs_format='float32'), got dtype {obs.dtype}"
        )
    over = counts > field_max
    if over.any():
        row, col = map(int, np.argwhere(over)[0])
        raise ValueError(
            f"observation row {row} entry {col} is {int(counts[row, col])}, above the most "
            f"that entry of butifarra_env.core.observation can hold ({int(field_max[col])}): "
            "not an observation of this environment"
        )
    return counts


def check_batch(
    observations: np.ndarray, action_masks: np.ndarray, version: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The one check at the agent boundary: observations ``(N, 491)`` (``(N, 638)`` for
    ``version=1``) as ``uint8`` (the ``float32`` format is converted back) within the
    layout's ranges, and masks ``(N, 56)`` of 0/1 (whether a row has a legal action at all
    is left to the agents that need one, which say so). Raises
    ValueError naming what was wrong, so a wrong array fails loudly instead of being played
    blind."""
    obs = np.asarray(observations)
    masks = np.asarray(action_masks)
    size = layout(version).size
    if obs.ndim != 2 or obs.shape[1] != size:
        raise ValueError(
            f"observations must have shape (N, {size}) (observation v{version}), got {obs.shape}"
        )
    if masks.shape != (obs.shape[0], N_ACTIONS):
        raise ValueError(
            f"action_masks must have shape ({obs.shape[0]}, {N_ACTIONS}), got {masks.shape}"
        )
    if masks.dtype.kind not in "biuf" or not ((masks == 0) | (masks == 1)).all():
        raise ValueError("action_masks must hold 0 and 1 only (1 = legal)")
    return _canonical_observations(obs, version), masks


def _listed(variants: Iterable[str]) -> str:
    names = sorted(variants)
    return "no variant (the default rules only)" if not names else "only " + ", ".join(names)


def check_one(
    observation: np.ndarray, action_mask: np.ndarray, version: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`check_batch` for one observation ``(491,)`` (``(638,)`` for ``version=1``) and
    mask ``(56,)``."""
    obs = np.asarray(observation)
    mask = np.asarray(action_mask)
    size = layout(version).size
    if obs.shape != (size,):
        raise ValueError(
            f"an observation must have shape ({size},) (observation v{version}), got {obs.shape}"
        )
    if mask.shape != (N_ACTIONS,):
        raise ValueError(f"an action mask must have shape ({N_ACTIONS},), got {mask.shape}")
    o, m = check_batch(obs[None], mask[None], version)
    return o[0], m[0]
