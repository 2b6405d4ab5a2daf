"""How much the importance-sampled estimate (is1) saves per pair, measured exactly.

For each pair, the first ``--deals`` deals of a shipped set are played in full (plain
duplicate) and bid only (the is1 pass). From the full plays' per-deal results ``D`` and the
pass's scales ``s`` the variance of one is1 draw follows exactly for this pool,
``var_q(y) = mean(s) * mean(D^2 / s) - mean(D)^2``, so the factor
``var(D) / var_q(y)`` needs no repeated sampling. The pass's multipliers are checked
against the played ones (equal for agents that bid deterministically).

The wall-time gain at equal width is for a pool ``--pool-ratio`` times the plain run's
deals (the pool's own sampling then costs ``1 / ratio`` of the plain variance): plain
``n`` deals against the pass over ``ratio * n`` deals plus ``n / (f * (1 - 1 / ratio))``
draws played.

    python benchmarks/importance_factor.py --pair ppo rule --pair ppo ppo-r1 --deals 2000
    python benchmarks/importance_factor.py --pair search ppo-r1 --deals 500
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from agents.evaluation.arena import bid_multipliers, duel
from agents.evaluation.deal_sets import DEAL_SETS, load_deal_set
from agents.evaluation.importance import deal_scale


def measure(a: str, b: str, deals: list, seed: int, ratio: float) -> dict[str, float]:
    started = time.perf_counter()
    played = duel(a, b, len(deals), seed, deals=deals)
    t_play = (time.perf_counter() - started) / len(deals)
    started = time.perf_counter()
    multipliers = bid_multipliers(a, b, deals, seed)
    t_pass = (time.perf_counter() - started) / len(deals)
    same = float(np.mean(multipliers == played.hands["multiplier"].reshape(-1, 2)))
    d = played.pair_means.astype(np.float64)
    s = deal_scale(multipliers)
    var_y = float(s.mean() * np.mean(d * d / s) - d.mean() ** 2)
    factor = float(d.var()) / var_y
    draws = 1.0 / (factor * (1.0 - 1.0 / ratio))  # per plain deal
    gain = t_play / (ratio * t_pass + draws * t_play)
    return {"deals": len(deals), "sd": float(d.std()), "factor": factor, "t_play": t_play,
            "t_pass": t_pass, "gain": gain, "same_multipliers": same}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair", nargs=2, action="append", metavar=("A", "B"), required=True)
    p.add_argument("--deal-set", choices=sorted(DEAL_SETS), default="test")
    p.add_argument("--deals", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool-ratio", type=float, default=10.0)
    args = p.parse_args()
    deals = load_deal_set(args.deal_set)[: args.deals]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.deal_set}_v1, first {len(deals)} deals")
    print("| pair | deals | sd per deal | is1 factor | play ms/deal | pass ms/deal | "
          f"wall-time gain (pool {args.pool_ratio:g}x) | pass = play multipliers |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for a, b in args.pair:
        r = measure(a, b, deals, args.seed, args.pool_ratio)
        print(f"| `{a}` vs `{b}` | {r['deals']:,} | {r['sd']:.1f} | {r['factor']:.2f}x | "
              f"{1000 * r['t_play']:.1f} | {1000 * r['t_pass']:.2f} | {r['gain']:.2f}x | "
              f"{100 * r['same_multipliers']:.0f}% |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
