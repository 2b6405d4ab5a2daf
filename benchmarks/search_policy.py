"""The search agent's ``policy`` prior against its weight: paired duels against ``ppo``.

Each weight plays the same deals with the same seed, so the differences between weights are
paired per deal (the bidding is the bidder's either way: only the card play differs).

    python benchmarks/search_policy.py --setting search:samples=12,endgame=3 \
        --weights 0,1,3,10 --deal-set dev --deals 600
    python benchmarks/search_policy.py --setting search:samples=32,endgame=4 \
        --weights 0,0.5,1,2 --importance 150 --pool 20000 --seed 7
    python benchmarks/search_policy.py --specs search:samples=32,endgame=4,bidding=ppo-r6 \
        search:samples=32,endgame=4,bidding=ppo search:samples=32,endgame=4,bidding=ppo,policy=1 \
        --opponent ppo-r6 --importance 300 --seed 2026

``--specs`` compares whole agent specs instead of weights (the bidder may differ too; the
deals and the seed are still the same, so the differences stay paired per deal).

With ``--importance K`` each weight is an importance-sampled duel (is1, docs/evaluation.md)
on the same pool and draws, and the paired difference weights each draw's difference as the
estimate weights its result. Prints each weight's points per hand against ``ppo`` and its
difference from the first weight, with 95% intervals; ``--out FILE`` also writes them as
JSON (never overwritten).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from agents.evaluation.arena import duel
from agents.evaluation.deal_sets import DEAL_SETS, load_deal_set
from agents.evaluation.importance import importance_duel
from agents.registry import make_agent
from butifarra_env.core.fileio import atomic_write_text


def spec_of(setting: str, weight: float) -> str:
    """The setting with the weight named, 0 too (unset, the default bidder adds its prior)."""
    return f"{setting}{',' if ':' in setting else ':'}policy={weight:g}"


def interval(x: np.ndarray) -> list[float]:
    half = 1.96 * float(x.std(ddof=1)) / np.sqrt(len(x))
    return [float(x.mean()), float(x.mean()) - half, float(x.mean()) + half]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setting", default="search:samples=12,endgame=3")
    p.add_argument("--weights", default="0,1,3,10", help="comma-separated; the first is the base")
    p.add_argument("--specs", nargs="+", help="agent specs to compare instead of --weights")
    p.add_argument("--opponent", default="ppo")
    p.add_argument("--deal-set", choices=sorted(DEAL_SETS), default="dev")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--deals", type=int, default=600)
    p.add_argument("--importance", type=int, default=0, help="K draws (is1) instead of a deal set")
    p.add_argument("--pool", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.out is not None and args.out.exists():
        p.error(f"{args.out} exists; choose another file")
    weights = [float(w) for w in args.weights.split(",")]
    specs = args.specs or [spec_of(args.setting, w) for w in weights]
    names = args.specs or [f"{w:g}" for w in weights]
    scaled: dict[str, np.ndarray] = {}
    out: dict[str, object] = {"args": vars(args) | {"out": str(args.out)}, "weights": {}}
    for spec, name in zip(specs, names, strict=True):
        start = time.perf_counter()
        a, b = make_agent(spec, seed=args.seed), make_agent(args.opponent, seed=args.seed)
        if args.importance:
            r = importance_duel(a, b, args.pool, args.importance, args.seed, args.workers)
            s = np.sqrt((r.multipliers.astype(float) ** 2).mean(axis=1))
            scaled[name] = r.played.pair_means * s.mean() / s[r.drawn]
            est = r.estimate
            mean, low, high = est.mean, est.ci_low, est.ci_high
        else:
            deals = load_deal_set(args.deal_set)[args.first : args.first + args.deals]
            d = duel(a, b, len(deals), seed=args.seed, deals=deals, workers=args.workers)
            scaled[name] = d.pair_means
            mean, low, high = d.mean, d.ci_low, d.ci_high
        row: dict[str, object] = {"spec": spec, "points_per_hand": [mean, low, high]}
        line = f"{spec}: {mean:+.2f} [{low:+.2f}, {high:+.2f}]"
        if name != names[0]:
            diff = interval(scaled[name] - scaled[names[0]])
            row["minus_first"] = diff
            first = names[0] if args.specs else f"policy={names[0]}"
            line += f"; minus {first}: {diff[0]:+.2f} [{diff[1]:+.2f}, {diff[2]:+.2f}]"
        out["weights"][name] = row  # type: ignore[index]
        print(f"{line}  ({time.perf_counter() - start:.0f} s)", flush=True)
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
