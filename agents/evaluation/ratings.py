"""Ratings from duplicate duels: OpenSkill (Plackett-Luce) over every pair's deals.

:func:`agents.evaluation.arena.round_robin` duels every pair of agents on the same deals;
this module turns those duels into one rating per agent. Each duplicate deal of a pair is
one 1-vs-1 game (the side with the higher pair mean wins, equal means draw), the pairs
interleaved deal by deal so that no pair is rated last. openskill is in the ``train``
extra and imported only when a round robin runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

__all__ = ["PairResult", "openskill_model", "openskill_ratings"]


class PairResult(Protocol):
    """What rating needs of a duel (:class:`~agents.evaluation.arena.DuelResult` has it)."""

    @property
    def mean(self) -> float: ...

    @property
    def pair_means(self) -> np.ndarray: ...


def openskill_model() -> Any:
    """OpenSkill's Plackett-Luce model; ImportError saying what to install without it."""
    try:
        from openskill.models import PlackettLuce
    except ImportError as e:  # pragma: no cover - openskill is in the train extra
        raise ImportError("round_robin needs openskill: pip install 'butifarra-rl[train]'") from e
    return PlackettLuce()


def openskill_ratings(
    model: Any, names: list[str], duels: Mapping[tuple[str, str], PairResult], n_deals: int
) -> list[dict[str, Any]]:
    """One row per agent, best first: agent, mu, sigma, ordinal (mu - 3 sigma), mean points
    per hand against the field, share of deals won (draws count half)."""
    rating = {n: model.rating(name=n) for n in names}
    for d in range(n_deals):  # interleave pairs deal by deal so no pair is rated last
        for (na, nb), res in duels.items():
            x = res.pair_means[d]
            ranks = [0.0, 0.0] if x == 0 else ([0.0, 1.0] if x > 0 else [1.0, 0.0])
            [[ra], [rb]] = model.rate([[rating[na]], [rating[nb]]], ranks=ranks)
            rating[na], rating[nb] = ra, rb
    rows: list[dict[str, Any]] = []
    for n in names:
        pts, won, played = [], 0.0, 0
        for (na, nb), res in duels.items():
            if n not in (na, nb):
                continue
            sign = 1 if n == na else -1
            pts.append(sign * res.mean)
            won += float((sign * res.pair_means > 0).sum() + 0.5 * (res.pair_means == 0).sum())
            played += len(res.pair_means)
        r = rating[n]
        rows.append(
            {
                "agent": n,
                "mu": float(r.mu),
                "sigma": float(r.sigma),
                "ordinal": float(r.mu - 3 * r.sigma),
                "mean_points": float(np.mean(pts)),
                "deal_win_share": won / played,
            }
        )
    rows.sort(key=lambda r: -r["ordinal"])
    return rows
