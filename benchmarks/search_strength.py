"""The search agent's strength against its time per decision: the curve in the README.

For each setting it measures two things, separately so that neither disturbs the other:

1. **Time per card decision**: the agent plays ``--timing-deals`` deals of the dev deal set
   (its team against PPO, one process, one decision at a time) and every card decision it
   searches (two or more legal cards) is timed; median and worst are reported.
2. **Strength**: duplicate deals from the dev set (tuning) or the test set (reporting)
   against the first shipped PPO policy (``ppo-r1``, what every saved figure was measured
   against; the option keeps the name ``ppo``) and the rule-based player, with 95% CIs
   (:func:`agents.evaluation.arena.duel`, all cores; results do not depend on the number of
   workers).

    python benchmarks/search_strength.py --deals 2000 --deal-set test --out results/search
    python benchmarks/search_strength.py --settings search:samples=12,endgame=3 --deals 300
    python benchmarks/search_strength.py --settings search:samples=32,endgame=4 \
        --deal-set test --first 500 --deals 500 --opponents ppo   # one slice of a long run

Writes ``PREFIX.json`` (every number) and ``PREFIX.png`` (the curve); never overwrites.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.evaluation.arena import duel
from agents.evaluation.deal_sets import DEAL_SETS, load_deal_set
from agents.registry import make_agent
from butifarra_env import __version__
from butifarra_env.core.actions import mask_from_bits
from butifarra_env.core.fileio import atomic_write_bytes, atomic_write_text
from butifarra_env.core.game import Game
from butifarra_env.core.observation import encode
from butifarra_env.core.options import Options
from butifarra_env.core.rules import PHASE_PLAY

OPPONENTS = {"ppo": "ppo-r1", "rule": "rule"}
"""``--opponents`` name -> registry spec (``ppo`` is release 1 of the shipped policy)."""

SETTINGS = (
    "search:samples=4,endgame=2",
    "search:samples=12,endgame=3",
    "search:samples=32,endgame=4",
)


def decision_times(spec: str, deals: list[tuple[int, list[int]]], seed: int) -> list[float]:
    """Seconds per searched card decision of ``spec`` (seats 0 and 2) against PPO r1."""
    agents = [make_agent(spec, seed), make_agent(OPPONENTS["ppo"], seed)]
    times: list[float] = []
    for dealer, hands in deals:
        game = Game(Options(), dealer, list(hands))
        while not game.is_over:
            seat = game.to_move
            obs, mask = encode(game, seat), mask_from_bits(game.legal)
            agent = agents[seat & 1]
            searched = not seat & 1 and game.phase == PHASE_PLAY and game.legal & (game.legal - 1)
            start = time.perf_counter()
            action = agent.act(obs, mask)
            if searched:
                times.append(time.perf_counter() - start)
            game.step(int(action))
    return times


def measure(spec: str, args: argparse.Namespace) -> dict[str, Any]:
    dev = load_deal_set("dev")[: args.timing_deals]
    times = sorted(decision_times(spec, dev, args.seed))
    deals = load_deal_set(args.deal_set)[args.first :]
    row: dict[str, Any] = {
        "spec": spec,
        "decisions_timed": len(times),
        "median_ms": 1000 * statistics.median(times),
        "worst_ms": 1000 * times[-1],
    }
    for opponent in [] if args.timing_only else args.opponents:
        r = duel(
            spec, OPPONENTS[opponent], args.deals, args.seed, args.workers, progress=True,
            deals=deals,
        )  # fmt: skip
        row[f"vs_{opponent}"] = {
            "mean": r.mean,
            "lo": r.ci_low,
            "hi": r.ci_high,
            "deals": f"{args.deal_set} {args.first}-{args.first + args.deals - 1}",
            "pair_means": [round(float(x), 3) for x in r.pair_means],
        }
    print(
        f"{spec:<34} {row['median_ms']:8.1f} {row['worst_ms']:9.1f}   "
        + "   ".join(
            f"{row[k]['mean']:+6.2f} [{row[k]['lo']:+.2f}, {row[k]['hi']:+.2f}]"
            for k in (f"vs_{o}" for o in args.opponents)
            if k in row
        ),
        flush=True,
    )
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in (("vs_ppo", "vs PPO r1"), ("vs_rule", "vs rule-based")):
        have = [r for r in rows if key in r]  # a setting may be measured against one only
        if not have:
            continue
        x = [r["median_ms"] for r in have]
        y = [r[key]["mean"] for r in have]
        err = np.array(
            [
                [r[key]["mean"] - r[key]["lo"] for r in have],
                [r[key]["hi"] - r[key]["mean"] for r in have],
            ]
        )
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xticks([1, 3, 10, 30, 100, 300, 1000], ["1", "3", "10", "30", "100", "300", "1000"])
    ax.minorticks_off()
    ax.set_xlim(2, 150)
    ax.set_xlabel("median time per searched card decision (ms, one core)")
    ax.set_ylabel("points per hand (duplicate, 95% CI)")
    ax.set_title("Search agent: strength vs time per decision")
    ax.legend()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write_bytes(path, buf.getvalue(), overwrite=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), help="agent specs")
    p.add_argument("--deal-set", choices=sorted(DEAL_SETS), default="dev")
    p.add_argument("--deals", type=int, default=500, help="duplicate deals per opponent")
    p.add_argument("--first", type=int, default=0, help="index of the first deal of the set")
    p.add_argument("--opponents", nargs="+", default=list(OPPONENTS), choices=list(OPPONENTS))
    p.add_argument("--timing-deals", type=int, default=8, help="deals played to time decisions")
    p.add_argument("--timing-only", action="store_true", help="time decisions, play no duels")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=0, help="processes (0 = all cores)")
    p.add_argument("--out", help="write OUT.json and OUT.png (never overwritten)")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else None
    if out is not None:
        for suffix in (".json", ".png"):
            if out.with_suffix(suffix).exists():
                p.error(f"{out.with_suffix(suffix)} exists; choose another --out")
    print(f"{'setting':<34} {'median ms':>8} {'worst ms':>9}   vs ppo (95% CI)          vs rule")
    rows = [measure(s, args) for s in args.settings]
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        spec = DEAL_SETS[args.deal_set]
        meta = {"package_version": __version__, "deal_set": spec.label, "sha256": spec.sha256}
        meta.update(seed=args.seed, timing_deals=args.timing_deals, rows=rows)
        atomic_write_text(
            out.with_suffix(".json"), json.dumps(meta, indent=2) + "\n", overwrite=False
        )
        plot(rows, out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
