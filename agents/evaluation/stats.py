"""The one confidence interval of the project: a Student-t interval over independent values.

The arena reports it over per-deal means, PPO training over its evaluation deals, the demo
prints it. Standard library and numpy only.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

__all__ = ["mean_ci", "t_quantile"]


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile via the Cornish-Fisher expansion of the normal one (exact to
    ~1e-4 from df = 5; the per-deal samples here are in the thousands)."""
    if df <= 0:
        raise ValueError("need at least two values for a confidence interval")
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the t interval at ``level`` over independent ``values`` (NaN
    bounds with fewer than two values; NaN mean with none)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2:
        mean = float(x.mean()) if len(x) else float("nan")
        return mean, float("nan"), float("nan")
    mean = float(x.mean())
    half = t_quantile(0.5 + level / 2, len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mean, mean - half, mean + half
