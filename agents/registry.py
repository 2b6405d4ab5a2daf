"""Building agents by name: the registry behind ``make_agent("rule")`` and the CLI.

A spec is a short name, optionally with an argument after ``:`` (``"random"``, ``"rule"``,
``"ppo"``, ``"ppo:path/to/ckpt.pt"``, ``"ppo-r1"``, ``"ppo-r5"`` to ``"ppo-r11"``). A PPO
spec may end in ``allow_variants`` (``"ppo:allow_variants"``,
``"ppo:ckpt.pt,allow_variants"``, ``"ppo-r1:allow_variants"``): the policy then plays the
regional variants it was not trained under instead of refusing them
(:meth:`agents.base.Agent.set_options`). Each name
maps to a factory in :data:`AGENT_FACTORIES`; factories import their agent's module when
called, so that ``import agents`` stays cheap and torch is only loaded when a PPO agent is
asked for. To add an agent, add one line to :data:`AGENT_FACTORIES` (or call
:func:`register_agent`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from agents.base import VARIANTS, Agent
from butifarra_env.core.validate import check_seed

__all__ = [
    "AGENT_FACTORIES",
    "DEFAULT_PPO_CHECKPOINT",
    "PPO_RELEASES",
    "R1_PPO_CHECKPOINT",
    "R5_PPO_CHECKPOINT",
    "R6_PPO_CHECKPOINT",
    "R7_PPO_CHECKPOINT",
    "R8_PPO_CHECKPOINT",
    "R9_PPO_CHECKPOINT",
    "R10_PPO_CHECKPOINT",
    "R11_PPO_CHECKPOINT",
    "AgentFactory",
    "agent_names",
    "make_agent",
    "register_agent",
]

DEFAULT_PPO_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "ppo_butifarra.pt"
"""The shipped PPO policy, used by the spec ``"ppo"`` without a path."""
PPO_RELEASES: dict[int, Path] = {
    n: DEFAULT_PPO_CHECKPOINT.with_name(f"ppo_r{n}.pt") for n in (1, 5, 6, 7, 8, 9, 10, 11)
}
"""Release number -> checkpoint of the PPO policies once shipped as ``"ppo"`` and kept byte for
byte as the specs ``"ppo-rN"`` (release N was ``"ppo"`` until release N+1; 2 to 4 were not
kept), so that the figures measured with them stay reproducible and comparable. Release 1 is
the evaluation panel's ``ppo`` and its search member's bidder; release 6 was the search
agent's default bidder (``bidding=auto``) until release 12 took its place as bidder and card
prior. Keeping a release: its file in ``agents/checkpoints/``, its number here, its SHA-256
in ``tests/test_agents.py``."""
# the releases' paths by name, as imported since they were kept (``from agents import ...``)
R1_PPO_CHECKPOINT = PPO_RELEASES[1]
R5_PPO_CHECKPOINT = PPO_RELEASES[5]
R6_PPO_CHECKPOINT = PPO_RELEASES[6]
R7_PPO_CHECKPOINT = PPO_RELEASES[7]
R8_PPO_CHECKPOINT = PPO_RELEASES[8]
R9_PPO_CHECKPOINT = PPO_RELEASES[9]
R10_PPO_CHECKPOINT = PPO_RELEASES[10]
R11_PPO_CHECKPOINT = PPO_RELEASES[11]

AgentFactory = Callable[[str | None, int | None], Agent]
"""``factory(argument, seed)``: ``argument`` is the text after ``:`` in the spec (or None)."""


def _make_random(argument: str | None, seed: int | None) -> Agent:
    from agents.random_agent import RandomAgent

    _no_argument("random", argument)
    return RandomAgent(seed=seed)


def _make_rule(argument: str | None, seed: int | None) -> Agent:
    from agents.rule_based import RuleBasedAgent

    _no_argument("rule", argument)
    return RuleBasedAgent()


TORCH_SEED_LIMIT = 2**64
"""torch generators take seeds below 2**64; the PPO agent refuses larger ones up front."""
ALLOW_VARIANTS = "allow_variants"
"""The PPO spec option that plays the variants a checkpoint was not trained under."""
PPO_VARIANTS_HINT = (
    "the policy was trained under the default rules; seat an agent that plays every variant "
    "(rule, search:bidding=rule), or play it anyway with the spec ppo:allow_variants "
    "(ppo:PATH,allow_variants, ppo-r1:allow_variants)"
)
"""What a PPO agent's refusal of a variant suggests instead."""


def _ppo_argument(argument: str | None) -> tuple[str | None, bool]:
    """``(path or None, allow_variants)`` from the text after ``ppo:``: a trailing
    ``allow_variants`` (alone, or after a comma) is the option, unless the whole text names an
    existing file."""
    if not argument:
        return None, False
    try:
        if Path(argument).is_file():
            return argument, False
    except OSError:  # a name the system refuses: _make_ppo reports it
        return argument, False
    head, sep, tail = argument.rpartition(",")
    if tail.strip() == ALLOW_VARIANTS:
        return (head.strip() or None) if sep else None, True
    return argument, False


def _make_ppo(argument: str | None, seed: int | None) -> Agent:
    if seed is not None and seed >= TORCH_SEED_LIMIT:
        raise ValueError(f"seed for the PPO agent must be below 2**64, got {_shown(seed)}")
    argument, allow_variants = _ppo_argument(argument)
    path = Path(argument) if argument else DEFAULT_PPO_CHECKPOINT
    try:
        found = path.is_file()
    except OSError as e:  # a name the system refuses (too long, ...)
        raise ValueError(f"PPO checkpoint {_shown(str(path))}: {e.strerror}") from None
    if not found:
        raise ValueError(f"PPO checkpoint not found: {_shown(str(path))} (use ppo:PATH/TO/CKPT.pt)")
    try:
        from agents.ppo_agent import PPOAgent  # torch: imported only when asked for
    except ImportError as e:
        raise ValueError(f"the PPO agent is not available ({e}); install the 'train' extra") from e
    try:
        agent = PPOAgent(str(path))
    except Exception as e:  # any failure to load is a bad checkpoint, reported as such
        raise ValueError(f"could not load PPO checkpoint {_shown(str(path))}: {e}") from e
    agent.reset(seed)
    # A policy plays the rules it was trained under: the variants its checkpoint's training
    # options name (PPOAgent.trained_variants, agents.base.trained_variants; none for a
    # checkpoint without them, the shipped ones included), or every one when asked to.
    trained: frozenset[str] = getattr(agent, "trained_variants", frozenset())
    agent.supported_variants = VARIANTS if allow_variants else frozenset(trained)
    agent.variants_hint = PPO_VARIANTS_HINT
    return agent


def _release(name: str, checkpoint: Path) -> AgentFactory:
    """The factory of a kept release's spec (``"ppo-r1"``): its checkpoint, no path
    argument, ``allow_variants`` as for ``"ppo"``."""

    def make(argument: str | None, seed: int | None) -> Agent:
        if argument is not None and argument.strip() == ALLOW_VARIANTS:
            return _make_ppo(f"{checkpoint},{ALLOW_VARIANTS}", seed)
        _no_argument(name, argument)
        return _make_ppo(str(checkpoint), seed)

    return make


def _no_argument(name: str, argument: str | None) -> None:
    if argument:
        raise ValueError(f"agent {name!r} takes no argument, got {_shown(f'{name}:{argument}')}")


def _make_search(argument: str | None, seed: int | None) -> Agent:
    """``search`` or ``search:samples=32,budget=0.2,endgame=4,bidding=rule``: the options and
    their ranges are :class:`agents.search_agent.SearchConfig`'s (checked by its parser);
    ``infer`` and ``policy`` are then resolved against the bidding agent built here (its
    action probabilities, or 1 and 0 without them). Under ``bidding=auto`` (release 12) an
    unset ``policy`` is :data:`agents.search_agent.DEFAULT_POLICY`, under a named bidder 0."""
    from agents.search_agent import DEFAULT_POLICY, SearchAgent, SearchConfig

    config = SearchConfig.parse(argument)
    spec = config.bidding
    fallback = None
    default_policy = 0.0  # a named bidder: no prior unless the spec sets one
    if spec == "auto":
        try:
            # release 12, bidder and card prior: +1.84 points per hand over release 6 bidding
            # without a prior (docs/search.md). A new release is a new file under "ppo":
            # tests/test_agents.py checks this one by its SHA-256, so it gets pinned first
            bidding = make_agent("ppo", seed)
            fallback = make_agent("rule", seed)  # bids the variants release 12 cannot play
            default_policy = DEFAULT_POLICY
        except ValueError:  # no torch or no checkpoint: the rule-based player bids
            bidding = make_agent("rule", seed)
    else:  # SearchConfig refused bidding=search... already
        bidding = make_agent(spec, seed)
    return SearchAgent(
        config, bidding=bidding, seed=seed, fallback=fallback, default_policy=default_policy
    )


AGENT_FACTORIES: dict[str, AgentFactory] = {
    "random": _make_random,
    "rule": _make_rule,
    "ppo": _make_ppo,
    **{f"ppo-r{n}": _release(f"ppo-r{n}", path) for n, path in PPO_RELEASES.items()},
    "search": _make_search,
}
"""Spec name -> factory. Add an agent with one line here or :func:`register_agent`."""


def register_agent(name: str, factory: AgentFactory) -> None:
    """Make ``name`` (and ``name:ARG``) buildable by :func:`make_agent`."""
    if not name or ":" in name:
        raise ValueError(f"agent names must be non-empty and contain no ':', got {name!r}")
    AGENT_FACTORIES[name] = factory


def agent_names() -> list[str]:
    """The registered spec names, sorted, release numbers as numbers (``ppo-r9`` before
    ``ppo-r10``)."""
    return sorted(
        AGENT_FACTORIES, key=lambda n: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", n)]
    )


def make_agent(spec: str, seed: int | None = None) -> Agent:
    """Build an agent from a spec such as ``"random"``, ``"rule"`` or ``"ppo:ckpt.pt"``.

    Raises ValueError naming the allowed agents when the name is unknown, a clear
    ValueError when its argument (e.g. a checkpoint) is unusable, and one naming ``seed``
    unless it is None or an int >= 0 (:func:`butifarra_env.core.validate.check_seed`).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(
            f"agent spec must be a non-empty string, got {_shown(spec)}; allowed: {_allowed()}"
        )
    seed = check_seed(seed)
    name, _, argument = spec.strip().partition(":")
    factory = AGENT_FACTORIES.get(name.lower())
    if factory is None:
        raise ValueError(f"unknown agent {_shown(spec)}; allowed: {_allowed()}")
    agent = factory(argument or None, seed)
    if not isinstance(agent, Agent):
        raise TypeError(f"factory for {name!r} returned {type(agent).__name__}, not an Agent")
    return agent


def _shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut short: a message stays one readable line whatever was typed."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[: limit - 3] + "...")
    try:
        text = repr(value)
    except ValueError:  # an int too long to print (Python's 4300-digit limit)
        text = f"<a {value.bit_length()}-bit integer>" if isinstance(value, int) else "<?>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _allowed() -> str:
    return ", ".join(agent_names()) + " (ppo takes ppo:PATH/TO/CKPT.pt)"
