"""The evaluation protocol: one agent against a fixed reference panel on a shipped deal set.

:func:`evaluate` plays the agent in duplicate (:func:`agents.evaluation.arena.duel` with fixed
deals) against each panel member on the first ``n_deals`` deals of a versioned deal set
(:mod:`agents.evaluation.deal_sets`) and returns a :class:`ResultCard`: points per hand with a
95% CI, hands won, mean multiplier, how often the agent's team declares, delegates, plays
butifarra, doubles and is doubled (and its points in each case), the variance-reduced
estimate on the same deals (:mod:`agents.evaluation.variance`, ``cv1``; beside the plain
mean, which stays the headline of protocol 1) and the agent's decision time. The card's JSON
names the protocol version, the package version, the deal set and its SHA-256, the seed and
every spec, so a result can be reproduced and cited; everything in it but the timing depends
only on those (never on the number of worker processes).

A failing agent (or panel member) costs only that opponent's evaluation: the error, naming
the deal and the decision, goes into the card and the other opponents are still played. The
CLI is ``butifarra eval`` (:mod:`butifarra.cli`); the leaderboard is built from cards by
``python -m butifarra.leaderboard``. The protocol in words: ``docs/evaluation.md``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Agent
from agents.evaluation.arena import (
    AgentError,
    AgentLike,
    DuelResult,
    duel,
    format_table,
    resolve_agent,
)
from agents.evaluation.deal_sets import DEAL_SETS, Deal, load_deal_set
from agents.registry import make_agent
from butifarra_env import __version__
from butifarra_env.core.rules import NO_TRUMP
from butifarra_env.core.validate import check_int

__all__ = [
    "PANEL",
    "PANEL_SEARCH",
    "PROTOCOL_VERSION",
    "TIMING_DEALS",
    "Interrupted",
    "ResultCard",
    "evaluate",
    "load_card",
]

PROTOCOL_VERSION = 1
"""Bumped whenever the panel, the deal handling or the figures of a card change meaning."""

PANEL_SEARCH = "search:samples=4,endgame=2,bidding=ppo-r1"
"""The panel's search agent: a fast setting, so that a full evaluation stays affordable."""

PANEL: dict[str, str] = {
    "random": "random",
    "rule": "rule",
    "ppo": "ppo-r1",
    "search": PANEL_SEARCH,
}
"""The reference panel, in the order played: name in the card -> registry spec. Its ``ppo``
is release 1 of the shipped policy (``ppo-r1``), the one protocol v1 was defined with; a
newer shipped ``ppo`` is evaluated against it like any other agent."""

TIMING_DEALS = 4
"""Deals (each played twice, against the rule-based player) of the decision-time pass."""
TIMING_WARMUP = 5
"""Decisions of the timing pass left out of the figures (first-call set-up, caches)."""
TIMING_OPPONENT = "rule"

SITUATIONS = ("declares", "delegates", "butifarra", "doubles", "doubled")
"""The declaration figures of a card, from the agent's team's side: it chose trump (of all
hands), delegated the choice (of the hands it declared), chose butifarra (of the hands it
declared), made at least one double (of all hands), was doubled by the other team (of all
hands)."""


# --------------------------------------------------------------------------- the card
@dataclass
class ResultCard:
    """One agent's evaluation: what was played, against whom, and the figures per opponent."""

    agent: str
    """The agent's spec (a registry spec, or the name given for an outside agent)."""
    deal_set: str
    """The deal set's label, e.g. ``test_v1``."""
    deal_set_sha256: str
    n_deals: int
    seed: int
    panel: dict[str, str]
    """Panel name -> spec, in the order played."""
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Panel name -> figures (see :func:`opponent_figures`), for the opponents that finished."""
    errors: dict[str, str] = field(default_factory=dict)
    """Panel name -> what went wrong, for those that did not."""
    timing: dict[str, Any] = field(default_factory=dict)
    """Decision time of the agent: ``method``, ``decisions``, ``median_ms``, ``worst_ms``
    (or ``error``). The one part of a card that varies from run to run."""
    protocol_version: int = PROTOCOL_VERSION
    package_version: str = __version__

    @property
    def failed(self) -> bool:
        """Whether any part of the evaluation failed (an opponent or the timing pass)."""
        return bool(self.errors) or "error" in self.timing

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol_version": self.protocol_version,
            "package_version": self.package_version,
            "agent": self.agent,
            "deal_set": self.deal_set,
            "deal_set_sha256": self.deal_set_sha256,
            "n_deals": self.n_deals,
            "seed": self.seed,
            "panel": dict(self.panel),
            "results": {k: dict(v) for k, v in self.results.items()},
            "errors": dict(self.errors),
            "timing": dict(self.timing),
        }

    def to_json(self) -> str:
        """The card as JSON text (NaN written as null, so any JSON reader reads it)."""
        return json.dumps(_no_nan(self.to_dict()), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: object) -> ResultCard:
        """A card from its JSON object; ValueError naming the first missing or wrong field."""
        if not isinstance(data, dict):
            raise ValueError(f"a result card is a JSON object, got {type(data).__name__}")
        kinds: dict[str, type | tuple[type, ...]] = {
            "protocol_version": int,
            "package_version": str,
            "agent": str,
            "deal_set": str,
            "deal_set_sha256": str,
            "n_deals": int,
            "seed": int,
            "panel": dict,
            "results": dict,
            "errors": dict,
            "timing": dict,
        }
        for key, kind in kinds.items():
            if key not in data:
                raise ValueError(f"result card: field {key!r} is missing")
            if not isinstance(data[key], kind) or isinstance(data[key], bool):
                raise ValueError(f"result card: field {key!r} has the wrong type")
        for name, figures in data["results"].items():
            if not isinstance(figures, dict) or not _is_number(figures.get("points_per_hand")):
                raise ValueError(f"result card: results[{name!r}] has no points_per_hand")
        return cls(**{key: data[key] for key in kinds})

    def render(self) -> str:
        """The card as text: a header, the figures per opponent, errors, decision time."""
        head = [
            f"result card: {self.agent}  (butifarra-rl {self.package_version}, "
            f"evaluation protocol {self.protocol_version})",
            f"deal set {self.deal_set} (sha256 {self.deal_set_sha256[:16]}...): "
            f"first {self.n_deals} deals, each played twice with the teams swapped; "
            f"seed {self.seed}",
            "panel: " + ", ".join(f"{n} ({s})" if n != s else n for n, s in self.panel.items()),
        ]
        out = "\n".join(head)
        if self.results:
            rows = [
                [
                    name,
                    f"{r['points_per_hand']:+.2f}",
                    f"[{_signed(r['ci_low'])}, {_signed(r['ci_high'])}]",
                    _pct(r["hands_won"]),
                    _pct(r["hands_lost"]),
                    f"{r['mean_multiplier']:.2f}",
                ]
                for name, r in self.results.items()
            ]
            out += "\n\npoints per hand = the agent's team score minus the opponent's:\n"
            out += format_table(
                ["vs", "points/hand", "95% CI", "hands won", "hands lost", "mean multiplier"],
                rows,
            )
            srows = [
                [name] + [_situation(r[s]) for s in SITUATIONS] for name, r in self.results.items()
            ]
            out += (
                "\n\nthe agent's team: share of hands (points/hand in those hands); delegates "
                "and butifarra are shares of the hands it declared:\n"
            )
            out += format_table(["vs", *SITUATIONS], srows)
            reduced: dict[str, dict[str, Any]] = {
                n: r["variance_reduction"]
                for n, r in self.results.items()
                if isinstance(r.get("variance_reduction"), dict)
            }
            if reduced:
                vrows = [
                    [
                        name,
                        f"{v['points_per_hand']:+.2f}",
                        f"[{_signed(v['ci_low'])}, {_signed(v['ci_high'])}]",
                        _half(v["ci_low"], v["ci_high"]),
                        _half(self.results[name]["ci_low"], self.results[name]["ci_high"]),
                        _times(v["variance_factor"]),
                    ]
                    for name, v in reduced.items()
                ]
                version = next(iter(reduced.values()))["version"]
                out += (
                    f"\n\nvariance-reduced estimate ({version}: control variates with "
                    "expectation zero, same deals; the points/hand above stay the headline of "
                    f"protocol {self.protocol_version}):\n"
                )
                out += format_table(
                    ["vs", "points/hand", "95% CI", "±", "plain ±", "variance reduction"],
                    vrows,
                )
        for name, message in self.errors.items():
            out += f"\n\nvs {name}: FAILED: {message}"
        t = self.timing
        if "error" in t:
            out += f"\n\ndecision time: FAILED: {t['error']}"
        elif t:
            out += (
                f"\n\ndecision time: median {t['median_ms']:.3f} ms, worst {t['worst_ms']:.3f} ms "
                f"over {t['decisions']} decisions ({t['method']})"
            )
        return out


def load_card(path: str | os.PathLike[str]) -> ResultCard:
    """Read a card's JSON file; ValueError naming the file when it is not a card."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return ResultCard.from_dict(data)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not a readable result card: {e}") from None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _no_nan(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def _signed(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.2f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def _half(low: float | None, high: float | None) -> str:
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return "n/a"
    return f"{(high - low) / 2:.2f}"


def _times(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def _situation(s: dict[str, Any]) -> str:
    points = s["points_per_hand"]
    return f"{_pct(s['share'])} ({_signed(points)})" if s["hands"] else "0% (-)"


# --------------------------------------------------------------------------- figures
def opponent_figures(spec: str, res: DuelResult) -> dict[str, Any]:
    """A duel's figures from the agent's (side A's) side, as stored in a card."""
    h = res.hands
    diff = h["diff_a"].astype(np.float64)
    declares = h["chooser_team"] == 0
    level = h["doubling_level"]
    # level 1 is the defenders' double (contrar), 2 the declarers' (recontrar), and so on
    doubles = np.where(declares, level >= 2, level >= 1)
    doubled = np.where(declares, level >= 1, level >= 2)
    cases = {
        "declares": (declares, np.ones_like(declares)),
        "delegates": (declares & (h["delegated"] == 1), declares),
        "butifarra": (declares & (h["trump"] == NO_TRUMP), declares),
        "doubles": (doubles, np.ones_like(declares)),
        "doubled": (doubled, np.ones_like(declares)),
    }
    out: dict[str, Any] = {
        "spec": spec,
        "n_deals": res.n_deals,
        "points_per_hand": _round(res.mean),
        "ci_low": _round(res.ci_low),
        "ci_high": _round(res.ci_high),
        "hands_won": _round(float((h["score_a"] > h["score_b"]).mean())),
        "hands_lost": _round(float((h["score_b"] > h["score_a"]).mean())),
        "mean_multiplier": _round(float(h["multiplier"].mean())),
    }
    for name, (where, of) in cases.items():
        n = int(where.sum())
        out[name] = {
            "hands": n,
            "share": _round(n / max(1, int(of.sum()))),
            "points_per_hand": _round(float(diff[where].mean())) if n else None,
        }
    if res.reduced is not None:
        out["variance_reduction"] = res.reduced.to_dict()
    return out


def _round(x: float) -> float:
    """Six decimals: readable files, and the same text for the same numbers."""
    return round(float(x), 6) if math.isfinite(x) else float("nan")


# --------------------------------------------------------------------------- timing
class _Timed(Agent):
    """The agent, asked one observation at a time through ``act``, each call timed."""

    def __init__(self, inner: Agent) -> None:
        self.inner = inner
        self.name = inner.name
        self.ns: list[int] = []

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        start = time.perf_counter_ns()
        action = self.inner.act(observation, action_mask)
        self.ns.append(time.perf_counter_ns() - start)
        return action

    def reset(self, seed: int | None = None) -> None:
        self.inner.reset(seed)


def time_decisions(agent: Agent, deals: Sequence[Any], seed: int) -> dict[str, Any]:
    """Median and worst time of the agent's ``act`` on single observations, over its
    decisions in the first :data:`TIMING_DEALS` deals (both seatings) against the
    rule-based player, in this process."""
    n = min(TIMING_DEALS, len(deals))
    timed = _Timed(agent)
    duel(timed, make_agent(TIMING_OPPONENT, seed), n, seed, workers=1, deals=deals)
    ns = np.asarray(timed.ns[TIMING_WARMUP:] or timed.ns, dtype=np.float64)
    return {
        "method": (
            f"act() on one observation at a time, the agent's decisions in the first {n} "
            f"deals (both seatings) against {TIMING_OPPONENT}, first {TIMING_WARMUP} left out, "
            "one process"
        ),
        "decisions": len(ns),
        "median_ms": round(float(np.median(ns)) / 1e6, 4),
        "worst_ms": round(float(ns.max()) / 1e6, 4),
    }


# --------------------------------------------------------------------------- evaluate
class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`evaluate`. Still a KeyboardInterrupt; ``card`` holds the
    opponents finished before it (the others are in ``card.errors`` as not played)."""

    def __init__(self, card: ResultCard) -> None:
        super().__init__("evaluation interrupted")
        self.card = card


def _check_panel(panel: object) -> dict[str, str]:
    if panel is None:
        return dict(PANEL)
    if isinstance(panel, str) or not isinstance(panel, (list, tuple)) or not panel:
        raise ValueError(
            f"panel must be a non-empty list of panel names {list(PANEL)} or None, got {panel!r}"
        )
    bad = [p for p in panel if p not in PANEL]
    if bad:
        raise ValueError(f"panel: unknown member {bad[0]!r}; the panel is {list(PANEL)}")
    if len(set(panel)) != len(panel):
        raise ValueError(f"panel: each member once, got {list(panel)}")
    return {p: PANEL[p] for p in PANEL if p in panel}  # always in panel order


def evaluate(
    agent: AgentLike | object,
    *,
    spec: str | None = None,
    deal_set: str = "test",
    n_deals: int | None = None,
    seed: int = 0,
    workers: int = 0,
    progress: bool = True,
    panel: Sequence[str] | None = None,
) -> ResultCard:
    """Evaluate ``agent`` against the panel on ``deal_set``; see the module docs.

    ``agent``: an :class:`~agents.base.Agent`, a registry spec, or anything
    :func:`agents.adapters.as_agent` accepts (a callable ``(observation, mask) -> action``,
    a policy object, an SB3-style model). ``spec`` names it in the card (default: the spec
    string when ``agent`` is one; required otherwise). ``n_deals``: the first that many deals
    of the set (default all); ``workers``: processes, 0 = all cores (results do not depend on
    it); ``panel``: a subset of :data:`PANEL`'s names (default the whole panel). Every
    argument is checked before any hand is played (ValueError naming it).
    """
    if spec is None and isinstance(agent, str):
        spec = agent
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(
            f"spec must name the agent for the card (e.g. 'my-agent v2'), got {spec!r}"
        )
    if deal_set not in DEAL_SETS:
        raise ValueError(f"deal_set must be one of {sorted(DEAL_SETS)}, got {deal_set!r}")
    info = DEAL_SETS[deal_set]
    n = info.n_deals if n_deals is None else check_int("n_deals", n_deals, 1, info.n_deals)
    seed = check_int("seed", seed, 0)
    workers = check_int("workers", workers, 0)
    if not isinstance(progress, bool):
        raise ValueError(f"progress must be True or False, got {type(progress).__name__}")
    members = _check_panel(panel)
    player = resolve_agent(agent, seed, "agent")  # type: ignore[arg-type]
    deals = load_deal_set(deal_set)[:n]
    processes = workers or os.cpu_count() or 1
    card = ResultCard(spec.strip(), info.label, info.sha256, n, seed, members)
    try:
        _play_panel(card, player, deals, processes, progress)
    except KeyboardInterrupt:
        for name in members:
            if name not in card.results and name not in card.errors:
                card.errors[name] = "not played: interrupted (Ctrl-C)"
        card.timing = card.timing or {"error": "not measured: interrupted (Ctrl-C)"}
        raise Interrupted(card) from None
    return card


def _play_panel(
    card: ResultCard, player: Agent, deals: list[Deal], processes: int, progress: bool
) -> None:
    """Fill ``card`` in: each panel member in turn (a failure recorded, not raised), then
    the timing pass."""
    n, seed = card.n_deals, card.seed
    for name, member in card.panel.items():
        try:
            opponent = make_agent(member, seed)
        except Exception as e:  # e.g. no torch for ppo: this opponent only
            card.errors[name] = f"could not build the panel agent {member!r}: {e}"
            continue
        try:
            res = duel(
                player,
                opponent,
                n,
                seed,
                workers=processes,
                progress=progress,
                names=(card.agent, name),
                deals=deals,
                variance_reduction=name,  # this member's shipped coefficients
                deals_uniform=True,  # the deal sets are uniform deals (deal_sets.generate)
            )
        except AgentError as e:
            card.errors[name] = str(e)
            continue
        except Exception as e:  # anything else an agent's code raised (reset, pickling, ...)
            card.errors[name] = f"{type(e).__name__}: {e}"
            continue
        card.results[name] = opponent_figures(member, res)
    try:
        card.timing = time_decisions(player, deals, seed)
    except Exception as e:
        card.timing = {"error": str(e) if isinstance(e, AgentError) else f"{type(e).__name__}: {e}"}
