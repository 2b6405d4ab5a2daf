"""The one interface every agent implements, and the registry that builds agents by name.

An agent sees exactly what a player sees: the observation vector of its seat
(:data:`butifarra_env.observation.OBS_SIZE` ``uint8`` values) and the action mask
(``int8`` of 56). It never gets the :class:`~butifarra_env.game.Game`, so the arena,
the environment and PPO self-play can all drive any agent the same way.

The registry maps a short spec (``"random"``, ``"rule"``, ``"ppo"``,
``"ppo:path/to/ckpt.pt"``) to a factory; factories import their module lazily so that
``import agents`` stays cheap and an agent with heavy dependencies (torch) is only
loaded when asked for. To add an agent, add one line to :data:`AGENT_FACTORIES` (or call
:func:`register_agent`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from pathlib import Path

import numpy as np

from butifarra_env.actions import N_ACTIONS
from butifarra_env.observation import OBS_SIZE


class Agent(abc.ABC):
    """A player: observation + legal-action mask in, action id out."""

    name: str = "agent"

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

    def reset(self, seed: int | None = None) -> None:  # noqa: B027 - optional hook
        """Reseed (and forget any per-hand state); deterministic agents ignore it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def check_batch(
    observations: np.ndarray, action_masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Validate batch shapes once, so a wrong array fails loudly instead of acting on garbage."""
    obs = np.asarray(observations)
    masks = np.asarray(action_masks)
    if obs.ndim != 2 or obs.shape[1] != OBS_SIZE:
        raise ValueError(f"observations must have shape (N, {OBS_SIZE}), got {obs.shape}")
    if masks.shape != (obs.shape[0], N_ACTIONS):
        raise ValueError(
            f"action_masks must have shape ({obs.shape[0]}, {N_ACTIONS}), got {masks.shape}"
        )
    return obs, masks


# --------------------------------------------------------------------------- registry
DEFAULT_PPO_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "ppo_butifarra.pt"

AgentFactory = Callable[[str | None, int | None], Agent]
"""``factory(argument, seed)``: ``argument`` is the text after ``:`` in the spec (or None)."""


def _make_random(arg: str | None, seed: int | None) -> Agent:
    from agents.random_agent import RandomAgent

    _no_argument("random", arg)
    return RandomAgent(seed=seed)


def _make_rule(arg: str | None, seed: int | None) -> Agent:
    from agents.rule_based import RuleBasedAgent

    _no_argument("rule", arg)
    return RuleBasedAgent()


def _make_ppo(arg: str | None, seed: int | None) -> Agent:
    path = Path(arg) if arg else DEFAULT_PPO_CHECKPOINT
    if not path.is_file():
        raise ValueError(f"PPO checkpoint not found: {str(path)!r} (use ppo:PATH/TO/CKPT.pt)")
    try:
        from agents.ppo_agent import PPOAgent
    except ImportError as e:
        raise ValueError(f"the PPO agent is not available ({e}); install the 'train' extra") from e
    try:
        agent = PPOAgent(str(path))
    except Exception as e:  # any failure to load is a bad checkpoint, reported as such
        raise ValueError(f"could not load PPO checkpoint {str(path)!r}: {e}") from e
    agent.reset(seed)
    return agent


def _no_argument(name: str, arg: str | None) -> None:
    if arg:
        raise ValueError(f"agent {name!r} takes no argument, got {name}:{arg}")


AGENT_FACTORIES: dict[str, AgentFactory] = {
    "random": _make_random,
    "rule": _make_rule,
    "ppo": _make_ppo,
}
"""Spec name -> factory. Add an agent with one line here or :func:`register_agent`."""


def register_agent(name: str, factory: AgentFactory) -> None:
    """Make ``name`` (and ``name:ARG``) buildable by :func:`make_agent`."""
    if not name or ":" in name:
        raise ValueError(f"agent names must be non-empty and contain no ':', got {name!r}")
    AGENT_FACTORIES[name] = factory


def agent_names() -> list[str]:
    return sorted(AGENT_FACTORIES)


def make_agent(spec: str, seed: int | None = None) -> Agent:
    """Build an agent from a spec such as ``"random"``, ``"rule"`` or ``"ppo:ckpt.pt"``.

    Raises ValueError naming the allowed agents when the name is unknown, and a clear
    ValueError when its argument (e.g. a checkpoint) is unusable.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"agent spec must be a non-empty string; allowed: {_allowed()}")
    name, _, arg = spec.strip().partition(":")
    factory = AGENT_FACTORIES.get(name.lower())
    if factory is None:
        raise ValueError(f"unknown agent {spec!r}; allowed: {_allowed()}")
    agent = factory(arg or None, seed)
    if not isinstance(agent, Agent):
        raise TypeError(f"factory for {name!r} returned {type(agent).__name__}, not an Agent")
    return agent


def _allowed() -> str:
    return ", ".join(agent_names()) + " (ppo takes ppo:PATH/TO/CKPT.pt)"
