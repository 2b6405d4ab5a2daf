"""Is a candidate better than a baseline against the same opponent? Pair them on the deals.

Two duels against one opponent on the same duplicate deals share the luck of the cards a
second time: a deal that is good for the candidate's side tends to be good for the
baseline's too. The per-deal difference of their results (candidate minus baseline) has
a smaller variance than the two results apart whenever they correlate, so its t interval
is narrower than the one the two separate intervals imply (for two PPO runs against the
rule-based player the per-deal correlation is about 0.4: 1.7x fewer deals for the same
width). Both duels are played by :func:`duel`, with the same seed and deals; the difference
is exactly the difference of their plain means.

Python API: :func:`compare` plays both duels, :func:`paired_difference` pairs two duels
already played; the CLI is ``butifarra arena CANDIDATE OPPONENT --baseline BASELINE``.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.evaluation.arena import AgentLike, DuelResult, _check_names, duel, resolve_agent
from agents.evaluation.stats import mean_ci, t_quantile

__all__ = ["PairedComparison", "compare", "paired_difference"]


@dataclass
class PairedComparison:
    """``candidate`` and ``baseline`` against the same opponent on the same deals, and the
    per-deal difference of their results (points per hand, from their side)."""

    candidate: DuelResult
    baseline: DuelResult
    differences: np.ndarray
    """Per deal: the candidate's result minus the baseline's."""
    mean: float
    ci_low: float
    ci_high: float
    correlation: float
    """Of the two per-deal results (NaN when one of them does not vary)."""
    unpaired_half_width: float
    """The 95% half-width the difference would have if the two runs were on independent
    deals: what pairing saves is this over :attr:`ci_half_width`."""

    @property
    def ci_half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    @property
    def variance_factor(self) -> float:
        """How many times more deals two independent duels would need for this CI width."""
        h = self.ci_half_width
        return (self.unpaired_half_width / h) ** 2 if h > 0 else float("nan")

    def summary(self) -> str:
        c, b = self.candidate, self.baseline
        return (
            f"{c.name_a} minus {b.name_a}, both against {c.name_b} on the same "
            f"{c.n_deals} duplicate deals (seed {c.seed}):\n"
            f"  {self.mean:+.2f} points per hand  95% CI [{self.ci_low:+.2f}, "
            f"{self.ci_high:+.2f}] (±{self.ci_half_width:.2f}; ±"
            f"{self.unpaired_half_width:.2f} on independent deals, per-deal correlation "
            f"{self.correlation:.2f}, {self.variance_factor:.2f}x fewer deals)"
        )

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return round(float(x), 6) if math.isfinite(x) else None

        return {
            "candidate": self.candidate.to_dict(),
            "baseline": self.baseline.to_dict(),
            "difference": {
                "points_per_hand": num(self.mean),
                "ci_low": num(self.ci_low),
                "ci_high": num(self.ci_high),
                "correlation": num(self.correlation),
                "unpaired_ci_half_width": num(self.unpaired_half_width),
                "variance_factor": num(self.variance_factor),
            },
        }

    def deals_csv(self) -> str:
        """One row per deal: its index and the two results and their difference."""
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["deal", self.candidate.name_a, self.baseline.name_a, "difference"])
        for d, (x, y, z) in enumerate(
            zip(self.candidate.pair_means, self.baseline.pair_means, self.differences, strict=True)
        ):
            w.writerow([d, float(x), float(y), float(z)])
        return buf.getvalue()


def _first_dealers(result: DuelResult) -> np.ndarray:
    return result.hands["dealer"].reshape(result.n_deals, 2)[:, 0]


def paired_difference(candidate: DuelResult, baseline: DuelResult) -> PairedComparison:
    """Pair two duels played against the same opponent with the same seed and deals (from
    :func:`duel`); a ValueError says which of those differs (the deals are checked by
    their dealers, which differ between deal sets almost surely)."""
    for name, r in (("candidate", candidate), ("baseline", baseline)):
        if not isinstance(r, DuelResult):
            raise ValueError(f"{name} must be a DuelResult from duel(), got {type(r).__name__}")
    if candidate.n_deals != baseline.n_deals or candidate.n_deals < 2:
        raise ValueError(
            "the two duels must be on the same deals, at least two: the candidate's has "
            f"{candidate.n_deals}, the baseline's {baseline.n_deals}"
        )
    if candidate.seed != baseline.seed:
        raise ValueError(
            f"the two duels must have the same seed (the same deals): the candidate's is "
            f"{candidate.seed}, the baseline's {baseline.seed}"
        )
    if candidate.name_b != baseline.name_b:
        raise ValueError(
            "the two duels must be against the same opponent: the candidate's is "
            f"{candidate.name_b!r}, the baseline's {baseline.name_b!r}"
        )
    if not np.array_equal(_first_dealers(candidate), _first_dealers(baseline)):
        raise ValueError(
            "the two duels were not played on the same deals (their dealers differ): "
            "play both with the same seed and the same deal_fn or deals"
        )
    x = np.asarray(candidate.pair_means, dtype=np.float64)
    y = np.asarray(baseline.pair_means, dtype=np.float64)
    d = x - y
    mean, lo, hi = mean_ci(d)
    sx, sy = float(x.std(ddof=1)), float(y.std(ddof=1))
    corr = float(np.corrcoef(x, y)[0, 1]) if sx > 0 and sy > 0 else float("nan")
    unpaired = t_quantile(0.975, len(d) - 1) * math.sqrt((sx**2 + sy**2) / len(d))
    return PairedComparison(candidate, baseline, d, mean, lo, hi, corr, unpaired)


def compare(
    candidate: AgentLike,
    baseline: AgentLike,
    opponent: AgentLike,
    n_deals: int,
    seed: int = 0,
    names: tuple[str, str, str] | None = None,
    **duel_args: Any,
) -> PairedComparison:
    """Play ``candidate`` and then ``baseline`` against ``opponent`` on the same
    ``n_deals`` duplicate deals (:func:`duel` with the same ``seed`` and ``duel_args``:
    ``workers``, ``progress``, ``deal_fn``, ``deals``, ``options``, ``records_path``,
    ``variance_reduction``, ``deals_uniform``) and pair them. ``names``: the candidate's,
    the baseline's and the opponent's (default: the agents' own)."""
    checked = _check_names(names, 3)
    # all three are built before any hand, so a bad spec costs no duel
    c = resolve_agent(candidate, seed, "candidate")
    b = resolve_agent(baseline, seed, "baseline")
    o = resolve_agent(opponent, seed, "opponent")
    if checked is None:
        checked = (c.name, b.name if b.name != c.name else f"{b.name}#2", o.name)
    first = duel(c, o, n_deals, seed, names=(checked[0], checked[2]), **duel_args)
    second = duel(b, o, n_deals, seed, names=(checked[1], checked[2]), **duel_args)
    return paired_difference(first, second)
