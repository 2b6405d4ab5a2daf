"""Importance-sampled duplicate estimates (``is1``): play the deals that carry the variance.

Most of a duplicate result's variance is the hand's multiplier (``docs/evaluation.md``,
"Where the variance comes from"): a deal bid to x4 moves the mean four times as far as one
played at x1, with card play below it. The multiplier is settled when the card play starts,
a few decisions into the hand, so it can be known for every deal of a large pool at a small
cost before any deal is played to the end. ``is1``:

1. **Bidding pass**: every deal of the pool (``N`` deals) is played twice as in the duel,
   up to the first card only (:func:`agents.evaluation.arena.bid_multipliers`), giving its
   two multipliers ``m1, m2`` and its scale ``s = sqrt((m1**2 + m2**2) / 2)``
   (:func:`deal_scale`).
2. **Draws**: ``K`` deals drawn with replacement, deal ``i`` with probability
   ``q_i = s_i / sum(s)`` (:func:`draw_deals`, seeded): the deals that move the mean most
   are played most often.
3. **Play**: each draw is played as a duplicate deal (both seatings, to the end); a deal
   drawn twice is played twice. Its result ``D`` counts ``y = D / (N q) = D * mean(s) / s``
   (:func:`estimate`).

``mean(y)`` is unbiased for the pool's mean result whatever the scale is, as long as every
``q_i > 0`` (every multiplier is at least 1): ``sum_i q_i D_i / (N q_i) = mean_i D_i``
(Horvitz-Thompson). It stays unbiased when an agent bids at random, because the pass's
draws are independent of the plays' (only the variance gains less). The draws are
independent, so the interval is a t interval over the ``y``, widened by the pool's own
sampling (``sigma^2 / N``, with ``sigma^2`` the plain per-deal variance, estimated from the
draws): the interval is for the same expectation as the plain duplicate mean's (uniformly
dealt deals), not only for this pool. A pool much larger than the draws makes that term
small; ``equivalent_deals`` says how many plain deals give the same interval.

The scale is fixed by the version, before any data: ``s`` is the square root of the mean
squared multiplier of the deal's two plays (the per-deal standard deviation grows about in
proportion to the multiplier). Measured factors per pair are in ``docs/evaluation.md``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from agents.evaluation.arena import (
    AgentLike,
    DealFn,
    DuelResult,
    _check_names,
    _records_file,
    arena_deal,
    bid_multipliers,
    duel,
    resolve_agent,
    uniform_deal,
)
from agents.evaluation.deal_sets import Deal
from agents.evaluation.stats import t_quantile
from butifarra_env.core.options import Options
from butifarra_env.core.validate import check_int

__all__ = [
    "IS_VERSION",
    "ImportanceEstimate",
    "ImportanceResult",
    "deal_scale",
    "draw_deals",
    "estimate",
    "importance_duel",
]

IS_VERSION = "is1"
"""The pass (bidding to the first card), the scale (:func:`deal_scale`), the draws
(:func:`draw_deals`) and the interval (:func:`estimate`); a change to any is a new version."""

DRAW_STREAM = 3
"""The draws' generator is ``SeedSequence([seed, DRAW_STREAM])``: apart from the arena's
deal (0) and match (1) streams."""


def deal_scale(multipliers: np.ndarray) -> np.ndarray:
    """Per deal, ``sqrt((m1**2 + m2**2) / 2)`` of its two plays' multipliers (``(n, 2)``)."""
    m = np.asarray(multipliers, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] != 2 or not len(m) or not np.all(m >= 1):
        raise ValueError(
            f"multipliers must be an (n, 2) array of multipliers >= 1, got shape {m.shape}"
        )
    return np.sqrt((m**2).mean(axis=1))


def draw_deals(scale: np.ndarray, n_draws: int, seed: int) -> np.ndarray:
    """``n_draws`` pool indices drawn with replacement, index ``i`` with probability
    ``scale[i] / scale.sum()``, from the seed alone."""
    s = np.asarray(scale, dtype=np.float64)
    rng = np.random.default_rng(np.random.SeedSequence([seed, DRAW_STREAM]))
    return rng.choice(len(s), size=n_draws, replace=True, p=s / s.sum())


@dataclass(frozen=True)
class ImportanceEstimate:
    """The ``is1`` estimate of the mean per-deal result (A's side)."""

    mean: float
    ci_low: float
    ci_high: float
    pool: int
    """Deals bid in the pass (``N``)."""
    draws: int
    """Deals played to the end (``K``; both seatings each)."""
    variance_factor: float
    """The plain per-deal variance over the variance of one draw's ``y``: how many times more
    deals the plain mean needs for the same interval on a pool of the same deals."""
    equivalent_deals: float
    """The number of plain duplicate deals whose interval is as wide as this one (the pool's
    own sampling term included)."""
    pass_seconds: float = float("nan")
    play_seconds: float = float("nan")

    @property
    def ci_half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    def summary(self) -> str:
        return (
            f"importance-sampled ({IS_VERSION}): {self.mean:+.2f}  95% CI [{self.ci_low:+.2f}, "
            f"{self.ci_high:+.2f}] (±{self.ci_half_width:.2f}); {self.draws} deals played of a "
            f"pool of {self.pool} bid; {self.variance_factor:.2f}x fewer deals than plain "
            f"duplicate on the pool, as wide as {self.equivalent_deals:,.0f} plain deals"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": IS_VERSION,
            "points_per_hand": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "pool": self.pool,
            "draws": self.draws,
            "variance_factor": self.variance_factor,
            "equivalent_deals": self.equivalent_deals,
            "pass_seconds": self.pass_seconds,
            "play_seconds": self.play_seconds,
        }


def estimate(results: np.ndarray, scale: np.ndarray, mean_scale: float, pool: int,
             level: float = 0.95) -> ImportanceEstimate:  # fmt: skip
    """The estimate from the draws' per-deal results ``D_j`` and scales ``s_j`` (``mean_scale``:
    the scale's mean over the whole pool, ``pool``: its size ``N``).

    ``y_j = D_j * mean_scale / s_j``; the mean of the ``y``; the plain per-deal variance
    ``sigma^2 = mean(w D^2) - mean^2`` with ``w = mean_scale / s`` (unbiased for the pool's
    second moment, as the mean is for its first); the interval
    ``mean +- t * sqrt(var(y) / K + sigma^2 / N)``."""
    d = np.asarray(results, dtype=np.float64)
    s = np.asarray(scale, dtype=np.float64)
    k = len(d)
    if k < 2 or s.shape != d.shape:
        raise ValueError(f"need at least two draws with one scale each, got {k} and {s.shape}")
    w = mean_scale / s
    y = d * w
    mean = float(y.mean())
    var_y = float(y.var(ddof=1))
    sigma2 = max(float(np.mean(w * d * d)) - mean * mean, 0.0) * k / (k - 1)
    se2 = var_y / k + sigma2 / pool
    half = t_quantile(0.5 + level / 2, k - 1) * math.sqrt(se2)
    factor = sigma2 / var_y if var_y > 0 else float("inf")
    equivalent = sigma2 / se2 if se2 > 0 else float("inf")
    return ImportanceEstimate(mean, mean - half, mean + half, pool, k, factor, equivalent)


@dataclass
class ImportanceResult:
    """An ``is1`` duel: the estimate, the pass's multipliers and the draws' duel."""

    name_a: str
    name_b: str
    seed: int
    estimate: ImportanceEstimate
    multipliers: np.ndarray
    """The pass's ``(N, 2)`` multipliers (unswapped, swapped play) for every pool deal."""
    drawn: np.ndarray
    """The pool index of each draw, in the order played."""
    played: DuelResult
    """The duel of the drawn deals (its ``pair_means`` are the draws' ``D``). Its plain
    mean over-weights the high-multiplier deals: quote :attr:`estimate`, never that."""

    def summary(self) -> str:
        return (
            f"{self.name_a} vs {self.name_b}: seed {self.seed}\n"
            f"  mean points per hand ({self.name_a} team - {self.name_b} team), "
            f"{self.estimate.summary()}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_a": self.name_a,
            "agent_b": self.name_b,
            "seed": self.seed,
            "importance": self.estimate.to_dict(),
        }


def importance_duel(
    agent_a: AgentLike,
    agent_b: AgentLike,
    pool: int,
    draws: int,
    seed: int = 0,
    workers: int = 1,
    progress: bool = False,
    deal_fn: DealFn = uniform_deal,
    options: Options | None = None,
    names: tuple[str, str] | None = None,
    deals: Sequence[Deal] | None = None,
    records_path: str | os.PathLike[str] | None = None,
) -> ImportanceResult:
    """The ``is1`` estimate of ``agent_a`` against ``agent_b``: the bidding pass over a pool
    of ``pool`` deals, ``draws`` of them drawn by their scale and played (module docs).

    The pool is the first ``pool`` of ``deals`` when given (e.g. a shipped deal set), else
    the deals :func:`~agents.evaluation.arena.duel` would play with this seed and
    ``deal_fn``. ``records_path`` logs the drawn deals' hands as the duel does. Every
    argument is checked before any hand is played (ValueError naming it)."""
    pool = check_int("pool", pool, 1)
    draws = check_int("draws", draws, 2)
    seed = check_int("seed", seed, 0)
    if deals is not None:
        if not isinstance(deals, (list, tuple)):
            raise ValueError(f"deals must be a list of deals or None, got {type(deals).__name__}")
        if pool > len(deals):
            raise ValueError(f"pool must be at most len(deals) = {len(deals)}, got {pool}")
        if deal_fn is not uniform_deal:
            raise ValueError("give deals or deal_fn, not both")
    elif not callable(deal_fn):
        raise ValueError(f"deal_fn must be a function rng -> (dealer, hands), got {deal_fn!r}")
    _check_names(names)
    if records_path is not None:  # checked (and its folder made) before the pass, as duel does
        _records_file(records_path)
    a = resolve_agent(agent_a, seed, "agent_a")
    b = resolve_agent(agent_b, seed, "agent_b")
    pool_deals = list(deals[:pool]) if deals is not None else [
        arena_deal(seed, i, deal_fn) for i in range(pool)
    ]  # fmt: skip
    started = time.perf_counter()
    multipliers = bid_multipliers(a, b, pool_deals, seed, workers, progress, options)
    passed = time.perf_counter()
    scale = deal_scale(multipliers)
    drawn = draw_deals(scale, draws, seed)
    played = duel(
        a, b, draws, seed, workers, progress, options=options, names=names,
        deals=[pool_deals[i] for i in drawn], records_path=records_path,
    )  # fmt: skip
    done = time.perf_counter()
    est = replace(
        estimate(played.pair_means, scale[drawn], float(scale.mean()), pool),
        pass_seconds=passed - started,
        play_seconds=done - passed,
    )
    return ImportanceResult(played.name_a, played.name_b, seed, est, multipliers, drawn, played)
