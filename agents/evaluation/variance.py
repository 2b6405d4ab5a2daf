"""Variance-reduced duplicate estimates (``cv1``): control variates whose expectation is zero.

A duplicate deal's result (the mean of its two plays, :mod:`agents.evaluation.arena`) is the
protocol's unit of measurement. This module subtracts from it corrections that have
expectation exactly zero, so the mean of the corrected values estimates the same number
with (usually) less variance:

* **Decisions of players whose action probabilities are known** (AIVAT's correction): at
  such a decision, ``V(after the action taken) - sum_a pi(a) V(after a)`` over the legal
  actions, with ``V`` the fixed value function :func:`action_values`. Its expectation given
  the position is zero whatever ``V`` is, because the action *was drawn* from ``pi``. Which
  agents qualify is :func:`policy_known`: the random player, a sampling PPO agent, an agent
  that says so. A deterministic agent's policy is one-hot, so its correction is identically
  zero: the rule-based player, the greedy PPO agents (``ppo``, ``ppo-r1``; their softmax is
  *not* the policy they play, and using it would bias the estimate) and the search agent
  (random, but its distribution is unknown) get none.
* **Features of the deal** whose expectation under uniform dealing is known exactly
  (:data:`FEATURES`, :func:`feature_means`, computed by counting): ``beta . (phi(deal) -
  E[phi])``, with ``beta`` fitted on the ``dev_v1`` deal set and shipped in
  ``agents/evaluation/data/cv1.json`` with its provenance (:func:`load_coefficients`),
  never fitted on the deals being evaluated. The means are those of the dealing
  distribution, not of the deal set: centring on the set's own mean would make the
  correction sum to zero over the whole set and its interval a false one.

The value function ``V`` (team 0's score difference, RULES.md rewards): during card play,
``multiplier x (p0 - 36)`` where ``p0`` is team 0's points so far plus the double-dummy
value of the rest (:mod:`agents.double_dummy`, exact) once :data:`DD_TRICKS` tricks or fewer
are left, and before that a fixed split of the points still to win by the cards each team
holds (:func:`points_estimate`); in the bidding the same estimate at the start of play under
each trump, at the multiplier each choice leads to. It can be anything fixed before the data
is seen: a better one only removes more variance.

:func:`reduce` turns per-deal results, corrections and features into a
:class:`ReducedEstimate` (mean, 95% CI, measured variance reduction factor). The arena
computes the corrections after each chunk from the finished hands (:func:`hand_correction`
replays them), the protocol puts the estimate in every result card.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import product
from math import comb
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Agent, obs_version_of
from agents.double_dummy import Solver
from agents.evaluation.deal_sets import DEAL_SETS, Deal
from agents.evaluation.stats import mean_ci
from agents.random_agent import RandomAgent
from butifarra_env.core.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    N_ACTIONS,
    PASS,
    TRUMP_BASE,
    mask_from_bits,
)
from butifarra_env.core.cards import N_CARDS, N_SUITS, POINTS, SUIT, SUIT_MASK
from butifarra_env.core.game import Game
from butifarra_env.core.observation import layout, make_observer
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    HALF_POINTS,
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_PLAY,
    trick_state,
)

__all__ = [
    "CV_VERSION",
    "DATA_PATH",
    "DEFAULT",
    "DD_TRICKS",
    "FEATURES",
    "Coefficients",
    "ReducedEstimate",
    "action_values",
    "deal_features",
    "feature_means",
    "hand_correction",
    "load_coefficients",
    "points_estimate",
    "policy_known",
    "reduce",
    "table_corrections",
]

CV_VERSION = "cv1"
"""The version of everything fixed here: the value function, the features, their means and
the shipped coefficients. A change to any of them is a new version."""

DD_TRICKS = 2
"""From this many tricks left (or fewer) the value function is the exact double-dummy value.
Solver nodes per position at the start of a trick (100 rule-vs-rule hands of ``dev_v1``,
``benchmarks/variance_decomposition.py --solver-cost``): about 20 at 2 tricks left, 110 at 3,
470 at 4, 2,600 at 5; every legal action of every corrected decision is valued, so 2 keeps
the solver below the rest of the correction's cost."""

DATA_PATH = Path(__file__).resolve().parent / "data" / f"{CV_VERSION}.json"
"""The shipped coefficients (fitted on ``dev_v1``) and their provenance."""

TRUMP_WEIGHT = 3.0
"""In :func:`points_estimate`, what holding a trump adds to a card's weight."""
DOUBLE_CHANCE = 0.5
"""In the bidding's values, the chance that a player asked to double does (a fixed coin: the
expected multiplier of a chain from any point, :func:`expected_multiplier`)."""
TABLE_SHARE = (0.0, 0.6, 0.7, 0.85)
"""In :func:`points_estimate`, the share of a trick in progress (its points and the trick)
given to the team winning it now, by the number of cards on the table."""


# --------------------------------------------------------------------------- the value function
def _weights(trump: int) -> tuple[float, ...]:
    return tuple(
        1.0 + POINTS[c] + (TRUMP_WEIGHT if trump != NO_TRUMP and SUIT[c] == trump else 0.0)
        for c in range(N_CARDS)
    )


_WEIGHTS = tuple(_weights(t) for t in range(N_SUITS + 1))


def _weight(mask: int, w: tuple[float, ...]) -> float:
    total = 0.0
    while mask:
        low = mask & -mask
        total += w[low.bit_length() - 1]
        mask ^= low
    return total


def _points(mask: int) -> int:
    total = 0
    while mask:
        low = mask & -mask
        total += POINTS[low.bit_length() - 1]
        mask ^= low
    return total


def points_estimate(
    hands: Sequence[int],
    trump: int,
    plays: Sequence[tuple[int, int]] = (),
    team_points: Sequence[int] = (0, 0),
    offset0: float = 0.0,
    solver: Solver | None = None,
    to_move: int = 0,
) -> float:
    """Team 0's (seats 0 and 2) final points, estimated by a fixed formula from the position:
    its points so far; the trick in progress (``plays``: ``(seat, card)`` in play order, at
    most 3) shared by :data:`TABLE_SHARE` with the team winning it now; the rest split in
    proportion to the weight of the cards each team holds (1 + points, + :data:`TRUMP_WEIGHT`
    for a trump); ``offset0`` (points) shifted onto team 0 in proportion to what is left to
    win. With a ``solver`` (of this trump), the exact double-dummy value of the rest instead
    once :data:`DD_TRICKS` tricks or fewer are left."""
    held = hands[0] | hands[1] | hands[2] | hands[3]
    tricks_left = (held.bit_count() + len(plays)) // 4
    if solver is not None and tricks_left <= DD_TRICKS:
        return team_points[0] + solver.solve(hands, to_move, list(plays))
    table = sum(POINTS[c] for _, c in plays) + (1 if plays else 0)
    rest = _points(held) + tricks_left - (1 if plays else 0)
    w = _WEIGHTS[trump]
    s0 = _weight(hands[0] | hands[2], w)
    s1 = _weight(hands[1] | hands[3], w)
    share0 = s0 / (s0 + s1) if s0 + s1 > 0 else 0.5
    p0 = team_points[0] + rest * share0
    if plays:
        win_seat = trick_state(plays, trump)[2]
        q = TABLE_SHARE[len(plays)]
        p0 += table * (q if win_seat & 1 == 0 else 1.0 - q)
    left = rest + table
    p0 += offset0 * left / (HALF_POINTS * 2)
    return min(max(p0, float(team_points[0])), float(team_points[0] + left))


def expected_multiplier(options: Options, trump: int, level: int, asks: int) -> float:
    """The expected final multiplier of a doubling chain at ``level`` with ``asks`` (2 or 1)
    players of the team to answer still to be asked (0: the chain is over), when every
    player asked doubles with probability :data:`DOUBLE_CHANCE`."""
    cap = options.doubling_cap(trump)
    q = DOUBLE_CHANCE
    if asks == 0 or level >= cap:
        return float(options.multiplier(trump, level))
    doubled = expected_multiplier(options, trump, level + 1, 2)
    passed = expected_multiplier(options, trump, level, asks - 1)
    return q * doubled + (1 - q) * passed


def _start_value(game: Game, trump: int, level: int, asks: int, offset0: float) -> float:
    """V at the start of the doubling under ``trump`` (or after a doubling decision): the
    points estimate at the start of play times the chain's expected multiplier."""
    p0 = points_estimate(game.hands, trump, offset0=offset0)
    return expected_multiplier(game.options, trump, level, asks) * (p0 - HALF_POINTS)


def _trick_plays(game: Game) -> list[tuple[int, int]]:
    leader = game.trick_leader
    return [
        ((leader + k) & 3, game.trick_cards[(leader + k) & 3]) for k in range(game.cards_in_trick)
    ]


def action_values(
    game: Game, offset0: float = 0.0, solver: Solver | None = None
) -> dict[int, float]:
    """``V(after a)`` for each legal action ``a`` of the seat to move: team 0's score
    difference (multiplier included) estimated by the fixed formula of the module docs. The
    game is not changed. ``solver``: a :class:`~agents.double_dummy.Solver` of the game's
    trump, reused between positions of one hand (card play only). The solver plays the
    default card-play rules: under a variant (obligada) ``V`` is still a fixed function of
    the position, so the corrections keep their zero expectation and only remove less."""
    g = game
    legal = [a for a in range(N_ACTIONS) if (g.legal >> a) & 1]
    if g.phase in (PHASE_CHOOSE_TRUMP, PHASE_CHOOSE_TRUMP_DELEGATED):
        by_trump = {t: _start_value(g, t, 0, 2, offset0) for t in range(N_SUITS + 1)}
        out = {a: by_trump[a - TRUMP_BASE] for a in legal if TRUMP_BASE <= a <= BUTIFARRA}
        if DELEGATE in legal:  # the partner's best choice for the declaring team, by V
            best = max if g.to_move & 1 == 0 else min
            out[DELEGATE] = best(by_trump.values())
        return out
    if g.phase == PHASE_DOUBLING:
        first = g.actions[-1][1] != PASS  # the first of the team asked (else its partner)
        out = {}
        if DOUBLE in legal:
            out[DOUBLE] = _start_value(g, g.trump, g.level + 1, 2, offset0)
        if PASS in legal:
            out[PASS] = _start_value(g, g.trump, g.level, 1 if first else 0, offset0)
        return out
    if g.phase != PHASE_PLAY:
        raise ValueError(f"no decision to value: the hand is in phase {g.phase}")
    seat = g.to_move
    plays = _trick_plays(g)
    mult = g.multiplier
    out = {}
    for card in legal:
        hands = list(g.hands)
        hands[seat] ^= 1 << card
        after = [*plays, (seat, card)]
        points = list(g.team_points)
        to_move = (seat + 1) & 3
        if len(after) == 4:
            winner = trick_state(after, g.trump)[2]
            points[winner & 1] += sum(POINTS[c] for _, c in after) + 1
            after, to_move = [], winner
        if not any(hands):
            p0 = float(points[0])
        else:
            p0 = points_estimate(hands, g.trump, after, points, offset0, solver, to_move)
        out[card] = mult * (p0 - HALF_POINTS)
    return out


# --------------------------------------------------------------------------- corrections
def policy_known(agent: Agent) -> bool:
    """Whether ``agent``'s moves are draws from its
    :meth:`~agents.base.Agent.action_probs_batch`: the random player, a PPO agent with
    ``deterministic=False``, or an agent whose ``plays_action_probs`` attribute is True (an
    outside agent opts in that way). Anything else (deterministic agents, agents whose
    randomness has no known distribution, greedy agents that report a softmax) is False:
    their decisions get no correction."""
    flag = getattr(agent, "plays_action_probs", None)
    if isinstance(flag, bool):
        return flag
    if type(agent) is RandomAgent:  # a subclass may play or report otherwise
        return True
    ppo = sys.modules.get("agents.ppo_agent")
    if ppo is not None and isinstance(agent, ppo.PPOAgent):
        return not agent.deterministic
    return False


Probs = Mapping[int, float] | np.ndarray | None
"""One decision's probabilities: over action ids (a mapping or a (56,) array), or None for a
decision that gets no correction."""


def hand_correction(game: Game, probs: Sequence[Probs], offset0: float = 0.0) -> tuple[float, int]:
    """The sum, over the decisions of ``game`` with probabilities (``probs``, one entry per
    action of ``game.actions``), of ``V(after the action taken) - sum_a pi(a) V(after a)``,
    from team 0's side; and the number of such decisions. The hand is replayed from its
    deal (``game`` is not changed). ``pi`` is normalised over the legal actions; it must put
    probability on the action taken (ValueError otherwise: the probabilities are not the
    policy that played)."""
    if len(probs) != len(game.actions):
        raise ValueError(
            f"probs must give one entry per action ({len(game.actions)}), got {len(probs)}"
        )
    g = Game(
        game.options, game.dealer, list(game.initial_hands), game.hand_number, game.match_scores
    )
    total, n = 0.0, 0
    solver: Solver | None = None
    for i, ((seat, action), p) in enumerate(zip(game.actions, probs, strict=True)):
        if p is not None:
            if g.phase == PHASE_PLAY and (solver is None or solver.trump != g.trump):
                solver = Solver(g.trump)
            values = action_values(g, offset0, solver)
            pi = {a: float(p[a]) for a in values}
            mass = sum(pi.values())
            if not mass > 0 or pi.get(action, 0.0) <= 0:
                raise ValueError(
                    f"decision {i} (seat {seat}): the probabilities give action {action}, the "
                    "one taken, no probability: they are not the policy that played"
                )
            total += values[action] - sum(pi[a] * values[a] for a in values) / mass
            n += 1
        g.step(action)
    return total, n


def table_corrections(
    hands: Sequence[tuple[Game, Sequence[int | None]]],
    agents: Sequence[Agent],
    offsets0: Sequence[float] | np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Team 0's :func:`hand_correction` for finished hands played by ``agents`` (each hand
    with its ``seat_agent``: the index in ``agents`` of the agent at each seat), using the
    action probabilities of the agents whose policy is known (:func:`policy_known`); and the
    number of decisions corrected. The random player's are uniform over the legal actions;
    other agents are asked :meth:`~agents.base.Agent.action_probs_batch` on each decision's
    observation, one batch per agent (the observations are rebuilt by replaying the hand).
    ``offsets0``: the value function's ``offset0`` per hand."""
    known = [policy_known(a) for a in agents]
    out = np.zeros(len(hands))
    if not any(known):
        return out, 0
    probs: list[list[Probs]] = [[None] * len(g.actions) for g, _ in hands]
    asks: dict[int, list[tuple[int, int, np.ndarray, np.ndarray]]] = {}
    for h, (game, seat_agent) in enumerate(hands):
        needs_obs = any(
            known[i] and type(agents[i]) is not RandomAgent for i in seat_agent if i is not None
        )
        g = Game(
            game.options,
            game.dealer,
            list(game.initial_hands),
            game.hand_number,
            game.match_scores,
        )
        versions = [obs_version_of(a) for a in agents]
        observer = make_observer(max(versions)) if needs_obs else None
        if observer is not None:
            observer.reset(g)
        for k, (seat, action) in enumerate(game.actions):
            idx = seat_agent[seat]
            if idx is not None and known[idx]:
                if type(agents[idx]) is RandomAgent:  # uniform: no observation needed
                    legal = [a for a in range(N_ACTIONS) if (g.legal >> a) & 1]
                    probs[h][k] = {a: 1.0 / len(legal) for a in legal}
                elif observer is not None:
                    obs = observer.observe(seat)[: layout(versions[idx]).size]
                    asks.setdefault(idx, []).append((h, k, obs, mask_from_bits(g.legal)))
            g.step(action)
            if observer is not None:
                observer.update(g, seat, action)
    for idx, rows in asks.items():
        obs = np.stack([r[2] for r in rows])
        masks = np.stack([r[3] for r in rows])
        p = agents[idx].action_probs_batch(obs, masks)
        if p is None:
            raise ValueError(
                f"agent {agents[idx].name!r} is said to play its action probabilities but "
                "action_probs_batch returned None"
            )
        p = np.asarray(p, dtype=np.float64)
        for (h, k, _, _), row in zip(rows, p, strict=True):
            probs[h][k] = row
    n = 0
    for h, (game, _) in enumerate(hands):
        offset = 0.0 if offsets0 is None else float(offsets0[h])
        out[h], m = hand_correction(game, probs[h], offset)
        n += m
    return out, n


# --------------------------------------------------------------------------- deal features
FEATURES = (
    "dealer_team_points",
    "dealer_points",
    "dealer_longest_suit",
    "partner_longest_suit",
    "dealer_team_longest_suit",
    "dealer_team_points_squared",
    "dealer_team_top_cards",
    "dealer_team_manilla_and_ace",
)
"""The deal features, all from the dealer's side (so that they mean the same whoever deals:
a duplicate result does not change when the deal is turned round the table): card points of
the dealer's team, of the dealer; longest suit of the dealer, of the partner, of the team's
24 cards together; the team's card points squared; the team's manillas and aces; the suits in
which the team holds both the manilla and the ace."""

_TOP = tuple(c for c in range(N_CARDS) if POINTS[c] >= 4)  # manillas (5) and aces (4)


def _longest(mask: int) -> int:
    return max((mask & SUIT_MASK[s]).bit_count() for s in range(N_SUITS))


def deal_features(dealer: int, hands: Sequence[int]) -> np.ndarray:
    """:data:`FEATURES` of one deal (``float64``), not centred."""
    d, p = hands[dealer], hands[(dealer + 2) & 3]
    team = d | p
    team_points = _points(team)
    both = sum(1 for s in range(N_SUITS) if all((team >> c) & 1 for c in _TOP if SUIT[c] == s))
    return np.array(
        [
            team_points,
            _points(d),
            _longest(d),
            _longest(p),
            _longest(team),
            team_points**2,
            sum((team >> c) & 1 for c in _TOP),
            both,
        ],
        dtype=np.float64,
    )


def deal_features_matrix(deals: Sequence[Deal]) -> np.ndarray:
    """:func:`deal_features` of each deal, one row per deal."""
    return np.stack([deal_features(dealer, hands) for dealer, hands in deals]).reshape(
        len(deals), len(FEATURES)
    )


def _longest_suit_mean(n_cards: int) -> Fraction:
    """E[longest suit] of ``n_cards`` cards drawn from the deck: every suit-length pattern,
    counted."""
    total = Fraction(0)
    for lengths in product(range(13), repeat=N_SUITS):
        if sum(lengths) != n_cards:
            continue
        ways = math.prod(comb(12, k) for k in lengths)
        total += max(lengths) * ways
    return total / comb(N_CARDS, n_cards)


@lru_cache(maxsize=1)
def exact_feature_means() -> tuple[Fraction, ...]:
    """E[feature] under uniform dealing, exactly (fractions): a hand is 12 cards, a team 24,
    drawn without replacement from the 48."""
    pts = [Fraction(p) for p in POINTS]
    n = Fraction(N_CARDS)
    mu = sum(pts) / n  # per card
    var = sum((p - mu) ** 2 for p in pts) / n
    team = Fraction(24)
    team_var = team * var * (n - team) / (n - 1)  # sampling without replacement
    team_mean = team * mu
    both = Fraction(24, 48) * Fraction(23, 47)
    return (
        team_mean,
        12 * mu,
        _longest_suit_mean(12),
        _longest_suit_mean(12),
        _longest_suit_mean(24),
        team_var + team_mean**2,
        Fraction(len(_TOP)) * Fraction(24, 48),
        N_SUITS * both,
    )


def feature_means() -> np.ndarray:
    """:func:`exact_feature_means` as ``float64``."""
    return np.array([float(m) for m in exact_feature_means()], dtype=np.float64)


# --------------------------------------------------------------------------- coefficients
@dataclass(frozen=True)
class Coefficients:
    """One set of shipped coefficients: the feature slopes and the value function's offset
    (points per hand that the evaluated agent's team takes above :func:`points_estimate`),
    with where they were fitted."""

    key: str
    beta: tuple[float, ...]
    offset: float
    fitted_on: str
    """E.g. ``"dev_v1: ppo vs rule, 2000 deals, seed 0"``."""

    @property
    def uses_features(self) -> bool:
        return any(b != 0.0 for b in self.beta)


DEFAULT = Coefficients("default", (0.0,) * len(FEATURES), 0.0, "nothing: built in, all zero")
"""No feature correction and a zero offset: what a pair without shipped coefficients gets."""


def data_sha256(path: Path = DATA_PATH) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=4)
def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"variance-reduction coefficients {path}: {e}") from None
    dev = DEAL_SETS["dev"]
    problems = []
    if data.get("version") != CV_VERSION:
        problems.append(f"version {data.get('version')!r}, expected {CV_VERSION!r}")
    if data.get("deal_set") != dev.label or data.get("deal_set_sha256") != dev.sha256:
        problems.append(
            f"fitted on {data.get('deal_set')!r} ({data.get('deal_set_sha256')!r}), not on "
            f"{dev.label} ({dev.sha256}): coefficients are fitted on the dev set only"
        )
    if data.get("features") != list(FEATURES):
        problems.append("its feature names are not this version's")
    means = data.get("feature_means")
    if not isinstance(means, list) or not np.allclose(means, feature_means(), rtol=0, atol=1e-12):
        problems.append("its feature means are not the exact ones")
    fits = data.get("fits")
    if not isinstance(fits, dict):
        problems.append("it has no 'fits'")
    else:
        for key, fit in fits.items():
            beta = fit.get("beta") if isinstance(fit, dict) else None
            if not isinstance(beta, list) or len(beta) != len(FEATURES):
                problems.append(f"fits[{key!r}] has no beta of {len(FEATURES)} numbers")
            elif not isinstance(fit.get("offset"), (int, float)):
                problems.append(f"fits[{key!r}] has no offset")
    if problems:
        raise ValueError(f"variance-reduction coefficients {path}: " + "; ".join(problems))
    return dict(data)


def load_coefficients(key: str = "default", path: Path = DATA_PATH) -> Coefficients:
    """The coefficients for ``key``: ``"default"`` (and any name without shipped ones) is
    :data:`DEFAULT`, built in: no feature correction and no offset, so only the decision
    corrections are made. A panel member's name gives its shipped fit from ``path``, after
    checking the file: this version, fitted on ``dev_v1`` (its SHA-256), this version's
    features and their exact means (ValueError naming what is wrong otherwise)."""
    if key == DEFAULT.key:
        return DEFAULT
    data = _load(path)
    fit = data["fits"].get(key)
    if fit is None:
        return DEFAULT
    return Coefficients(
        key,
        tuple(float(b) for b in fit["beta"]),
        float(fit["offset"]),
        str(fit.get("fitted_on", "")),
    )


def fit_coefficients(values: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Least-squares slopes of ``values`` on the centred features (an intercept fitted and
    dropped). Only ever given the dev set's results (:func:`load_coefficients` checks)."""
    x = np.asarray(features, dtype=np.float64) - feature_means()
    design = np.column_stack([np.ones(len(x)), x])
    sol, *_ = np.linalg.lstsq(design, np.asarray(values, dtype=np.float64), rcond=None)
    return np.asarray(sol[1:], dtype=np.float64)


# --------------------------------------------------------------------------- the estimate
@dataclass(frozen=True)
class ReducedEstimate:
    """The variance-reduced mean over the same deals as the plain duplicate mean."""

    mean: float
    ci_low: float
    ci_high: float
    plain_mean: float
    plain_ci_low: float
    plain_ci_high: float
    factor: float
    """Measured variance reduction: the variance of the plain per-deal results over that of
    the corrected ones (the plain estimate needs this many times more deals for the same CI
    width)."""
    decisions: int
    """Decisions corrected (of players whose action probabilities are known)."""
    coefficients: Coefficients
    features: bool
    """Whether the deal-feature correction was applied (deals dealt uniformly)."""
    values: np.ndarray
    """The corrected per-deal results."""

    @property
    def ci_half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CV_VERSION,
            "points_per_hand": _round(self.mean),
            "ci_low": _round(self.ci_low),
            "ci_high": _round(self.ci_high),
            "variance_factor": _round(self.factor),
            "decisions_corrected": self.decisions,
            "deal_features": self.features,
            "coefficients": self.coefficients.key,
            "fitted_on": self.coefficients.fitted_on,
        }

    def summary(self) -> str:
        return (
            f"variance-reduced ({CV_VERSION}): {self.mean:+.2f}  95% CI "
            f"[{self.ci_low:+.2f}, {self.ci_high:+.2f}] (±{self.ci_half_width:.2f}); variance "
            f"{self.factor:.2f}x smaller than the plain mean's"
        )


def _round(x: float) -> float:
    return round(float(x), 6) if math.isfinite(x) else float("nan")


def reduce(
    pair_means: np.ndarray,
    corrections: np.ndarray | None = None,
    features: np.ndarray | None = None,
    coefficients: Coefficients = DEFAULT,
    decisions: int = 0,
) -> ReducedEstimate:
    """The corrected per-deal results ``pair_means - corrections - beta . (features -
    E[features])`` and their mean with a 95% t interval (:func:`~agents.evaluation.stats.mean_ci`),
    beside the plain ones. ``corrections``: per deal, from the evaluated agent's side (the
    mean of its two plays' :func:`hand_correction`); ``features``: one row per deal
    (:func:`deal_features`), or None when the deals were not dealt uniformly (the feature
    means would not be theirs)."""
    x = np.asarray(pair_means, dtype=np.float64)
    z = x.copy()
    if corrections is not None:
        z = z - np.asarray(corrections, dtype=np.float64)
    use_features = features is not None and coefficients.uses_features
    if use_features:
        centred = np.asarray(features, dtype=np.float64) - feature_means()
        z = z - centred @ np.asarray(coefficients.beta)
    mean, lo, hi = mean_ci(z)
    pmean, plo, phi = mean_ci(x)
    vx = float(x.var(ddof=1)) if len(x) > 1 else float("nan")
    vz = float(z.var(ddof=1)) if len(z) > 1 else float("nan")
    factor = vx / vz if vz > 0 else (1.0 if vx == vz == 0 else float("inf"))
    return ReducedEstimate(
        mean, lo, hi, pmean, plo, phi, factor, decisions, coefficients, use_features, z
    )
