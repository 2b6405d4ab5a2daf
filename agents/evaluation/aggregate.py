"""Scores across training seeds: the interquartile mean and its bootstrap interval.

One seed's score has its own confidence interval over deals (:func:`~agents.evaluation.stats.
mean_ci`); how a *recipe* does needs several seeds, and few seeds (3-10) make the mean
fragile and a t interval over seeds meaningless. Following Agarwal et al. (2021, the
``rliable`` library), we report the interquartile mean (the mean of the middle 50% of the
seeds: :func:`scipy.stats.trim_mean` at 25%) with a percentile bootstrap interval over
seeds (:func:`scipy.stats.bootstrap`). With fewer than four seeds nothing is trimmed and
the IQM is the mean. scipy is imported when these are called (the ``train`` extra has it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from butifarra_env.core.validate import check_int, check_seed

__all__ = ["SeedAggregate", "aggregate_seeds", "iqm"]

TRIM = 0.25
"""Share cut from each end: the interquartile mean."""


def _scores(values: Sequence[float] | np.ndarray) -> np.ndarray:
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"scores must be a list of numbers, got {values!r}") from None
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"scores must be a non-empty 1-D list of numbers, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"scores must be finite numbers, got {x.tolist()}")
    return x


def _stats() -> ModuleType:
    try:
        from scipy import stats  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            "the interquartile mean and its bootstrap interval need scipy: "
            'pip install -e ".[train]" (or pip install scipy)'
        ) from None
    return stats


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """The interquartile mean of one score per seed (the mean below four seeds)."""
    return float(_stats().trim_mean(_scores(values), TRIM))


@dataclass(frozen=True)
class SeedAggregate:
    """A recipe's score over seeds: IQM, its bootstrap interval, the seeds' own scores."""

    iqm: float
    ci_low: float
    ci_high: float
    """Percentile bootstrap interval over seeds (NaN with a single seed)."""
    scores: tuple[float, ...]
    level: float

    def to_dict(self) -> dict[str, object]:
        return {
            "iqm": self.iqm,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "scores": list(self.scores),
            "level": self.level,
        }


def aggregate_seeds(
    scores: Sequence[float] | np.ndarray,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> SeedAggregate:
    """IQM of ``scores`` (one per seed) with a percentile bootstrap interval at ``level``
    over seeds; same seed, same interval. A single seed gets NaN bounds."""
    x = _scores(scores)
    if not (isinstance(level, float | int) and not isinstance(level, bool) and 0 < level < 1):
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    n_resamples = check_int("n_resamples", n_resamples, 100)
    rng = np.random.default_rng(check_seed(seed))
    stats = _stats()
    centre = float(stats.trim_mean(x, TRIM))
    if len(x) < 2 or np.ptp(x) == 0:
        low = high = math.nan if len(x) < 2 else centre
    else:
        res = stats.bootstrap(
            (x,),
            lambda s, axis=-1: stats.trim_mean(s, TRIM, axis=axis),
            confidence_level=float(level),
            n_resamples=n_resamples,
            method="percentile",
            rng=rng,
        )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return SeedAggregate(centre, low, high, tuple(float(v) for v in x), float(level))
