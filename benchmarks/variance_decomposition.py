"""Where the variance of a duplicate result comes from, and what the ``cv1`` corrections remove.

For each pair of agents (by default the leaderboard pairs: ``ppo`` vs ``rule``, ``ppo`` vs
``ppo-r1``, ``search`` vs ``ppo-r1``) it plays the first ``--deals`` deals of a deal set in
duplicate (:func:`agents.evaluation.arena.duel`, fixed deals, the protocol's unit: the mean
of a deal's two plays) and splits the variance of that per-deal result:

* **agents' own randomness**: the same deals replayed with ``--seeds`` more agent seeds; the
  mean within-deal variance over the total (0 for deterministic agents, exactly);
* **the multiplier and the doubling chain**: the variance with every hand scored at
  multiplier 1 (the team's points - 36), against the total;
* **trump choice and delegation / doubling / card play**: the share of the sum of squares
  from deals whose two plays chose a different trump or delegated differently, from deals
  that differ only in the doubling, and from deals bid identically in both plays (whose
  difference is card play alone);
* **the endgame of the card play**: the variance of the change when the last
  ``--endgame`` tricks of every hand are played double-dummy instead (exact solver);
* **cv1**: the measured variance reduction factor of the corrected estimate
  (:mod:`agents.evaluation.variance`), and for pairs sharing agent A, the correlation of
  their per-deal results (what a correction from one duel to another could remove).

``--fit FILE`` instead fits the ``cv1`` coefficients on ``dev_v1`` (``--fit-agent`` against
every panel member) and writes them to FILE (never over an existing file); the shipped
``agents/evaluation/data/cv1.json`` is such a file. ``--solver-cost`` prints what the
double-dummy solver costs per position by tricks left (nodes; time on this machine).

    python benchmarks/variance_decomposition.py --deals 500 --search-deals 64 --seeds 2 \\
        --out results/variance.json
    python benchmarks/variance_decomposition.py --pair ppo random --deals 2000 --seeds 0
    python benchmarks/variance_decomposition.py --fit /tmp/cv1.json --deals 2000 \\
        --search-deals 200

Run it at ``nice -n 19`` on a shared machine; every number but the timings depends only on
the deals, the seeds and the agents.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.double_dummy import Solver
from agents.evaluation.arena import DuelResult, duel
from agents.evaluation.deal_sets import DEAL_SETS, Deal, load_deal_set
from agents.evaluation.protocol import PANEL
from agents.evaluation.variance import (
    CV_VERSION,
    FEATURES,
    deal_features_matrix,
    feature_means,
    fit_coefficients,
    points_estimate,
    table_corrections,
)
from agents.registry import make_agent
from butifarra_env import __version__
from butifarra_env.core.cards import N_TRICKS
from butifarra_env.core.fileio import atomic_write_text
from butifarra_env.core.game import Game
from butifarra_env.core.rules import HALF_POINTS, PHASE_PLAY
from butifarra_env.records import iter_records
from butifarra_env.records.replay import replay_game

PAIRS = (("ppo", "rule"), ("ppo", "ppo-r1"), ("search", "ppo-r1"))
"""The leaderboard pairs: the shipped policy against the rule-based player and against its
first release (the panel's ``ppo``), and the search agent at its default setting against the
panel's ``ppo``."""

FIT_AGENT = "ppo"
MIN_FEATURE_GAIN = 1.05
"""The feature slopes are shipped only if they cut the variance by at least this factor on
held-out dev deals (two folds); otherwise a noise fit would add variance on the test set."""


def member_key(spec: str) -> str:
    """The panel member whose spec ``spec`` is (its shipped coefficients), else default."""
    return next((name for name, s in PANEL.items() if s == spec), "default")


def seat_agents(swapped: int) -> tuple[int, int, int, int]:
    return (1, 0, 1, 0) if swapped else (0, 1, 0, 1)


def play(
    spec_a: str, spec_b: str, deals: list[Deal], seed: int, workers: int, key: str
) -> tuple[DuelResult, list[Game]]:
    """The duel on ``deals`` and its hands as games, deal-major (unswapped, then swapped)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hands.jsonl"
        res = duel(
            make_agent(spec_a, seed),
            make_agent(spec_b, seed),
            len(deals),
            seed,
            workers=workers,
            names=(spec_a, spec_b),
            records_path=path,
            deals=deals,
            variance_reduction=key,
            deals_uniform=True,
        )
        records = sorted(iter_records(path), key=lambda r: (r["deal"], r["swapped"]))
        games = [replay_game(r) for r in records]
    return res, games


def a_points(games: list[Game]) -> np.ndarray:
    """Agent A's team's points (0-72) per hand, hands deal-major."""
    return np.array([g.team_points[i % 2] for i, g in enumerate(games)], dtype=np.float64)


def endgame_dd_points(game: Game, tricks: int) -> float:
    """Team 0's points had the last ``tricks`` tricks been played double-dummy."""
    g = Game(game.options, game.dealer, list(game.initial_hands))
    for _seat, action in game.actions:
        if g.phase == PHASE_PLAY and len(g.tricks) == N_TRICKS - tricks and not g.cards_in_trick:
            break
        g.step(action)
    if g.is_over:
        return float(g.team_points[0])
    return float(g.team_points[0] + Solver(g.trump).solve(g.hands, g.to_move))


def ss_share(x: np.ndarray, where: np.ndarray) -> float:
    """Share of the sum of squares about the mean that comes from the deals ``where``."""
    ss = (x - x.mean()) ** 2
    return float(ss[where].sum() / ss.sum()) if ss.sum() > 0 else 0.0


def var(x: np.ndarray) -> float:
    return float(np.var(x, ddof=1)) if len(x) > 1 else float("nan")


def decompose(
    res: DuelResult, games: list[Game], replays: list[DuelResult], endgame: int
) -> dict[str, Any]:
    """The figures of one pair (see the module docs)."""
    n = res.n_deals
    h = res.hands
    x = res.pair_means.astype(np.float64)
    total = var(x)
    pa = a_points(games).reshape(n, 2)
    no_mult = (pa - HALF_POINTS).mean(axis=1)
    pair = {k: h[k].reshape(n, 2) for k in ("trump", "delegated", "doubling_level")}
    trump_differs = (pair["trump"][:, 0] != pair["trump"][:, 1]) | (
        pair["delegated"][:, 0] != pair["delegated"][:, 1]
    )
    doubling_only = ~trump_differs & (pair["doubling_level"][:, 0] != pair["doubling_level"][:, 1])
    same = ~trump_differs & ~doubling_only
    mult = h["multiplier"].astype(np.float64)
    signs = np.array([1.0, -1.0] * n)  # team 0's points -> agent A's side
    dd0 = np.array([endgame_dd_points(g, endgame) for g in games])
    team0 = np.array([g.team_points[0] for g in games], dtype=np.float64)
    x_dd = (signs * mult * (dd0 - team0)).reshape(n, 2).mean(axis=1)  # X(dd) - X
    out: dict[str, Any] = {
        "n_deals": n,
        "mean": res.mean,
        "ci_half_width": res.ci_half_width,
        "sd": total**0.5,
        "variance": total,
        "variance_without_multiplier": var(no_mult),
        "multiplier_share": 1.0 - var(no_mult) / total if total > 0 else 0.0,
        "mean_multiplier": float(mult.mean()),
        "deals_trump_or_delegation_differs": float(trump_differs.mean()),
        "deals_doubling_only_differs": float(doubling_only.mean()),
        "deals_bid_identically": float(same.mean()),
        "ss_share_trump_or_delegation": ss_share(x, trump_differs),
        "ss_share_doubling_only": ss_share(x, doubling_only),
        "ss_share_card_play_only": ss_share(x, same),
        f"endgame_{endgame}_tricks_dd_variance_ratio": var(x_dd) / total if total > 0 else 0.0,
    }
    if replays:
        runs = np.stack([x, *(r.pair_means for r in replays)])
        within = float(runs.var(axis=0, ddof=1).mean())
        out["seeds"] = len(runs)
        out["agent_randomness_share"] = within / var(runs.ravel()) if total > 0 else 0.0
    if res.reduced is not None:
        r = res.reduced
        out["cv1"] = {
            **r.to_dict(),
            "ci_half_width": r.ci_half_width,
            "plain_ci_half_width": res.ci_half_width,
        }
    return out


def solver_cost(deals: list[Deal], seed: int) -> list[dict[str, float]]:
    """Double-dummy solver nodes and time per position, by tricks left (positions at the
    start of a trick of rule-vs-rule hands on ``deals``)."""
    res, games = play("rule", "rule", deals, seed, 1, "default")
    del res
    out = []
    for k in range(1, 6):
        nodes, seconds = 0, 0.0
        for game in games:
            g = Game(game.options, game.dealer, list(game.initial_hands))
            for _seat, action in game.actions:
                if g.phase == PHASE_PLAY and len(g.tricks) == N_TRICKS - k and not g.cards_in_trick:
                    break
                g.step(action)
            solver = Solver(g.trump)
            start = time.perf_counter()
            solver.solve(g.hands, g.to_move)
            seconds += time.perf_counter() - start
            nodes += solver.nodes
        out.append(
            {
                "tricks_left": k,
                "nodes": nodes / len(games),
                "ms": 1000 * seconds / len(games),
            }
        )
    return out


# --------------------------------------------------------------------------- fitting
def fit_member(
    name: str, spec: str, agent: str, deals: list[Deal], seed: int, workers: int
) -> dict[str, Any]:
    """The coefficients for panel member ``name``: ``agent`` plays it on ``deals`` (dev_v1).
    The value function's offset is the mean of the points agent's team takes above
    :func:`points_estimate` at the start of play; the slopes are least squares of the
    decision-corrected results on the centred features, kept only if they also reduce the
    variance by :data:`MIN_FEATURE_GAIN` out of sample (two folds of the dev deals), else
    zero."""
    res, games = play(agent, spec, deals, seed, workers, "default")
    n = len(deals)
    estimate = []
    for i, g in enumerate(games):
        start = Game(g.options, g.dealer, list(g.initial_hands))
        for _seat, action in g.actions:
            if start.phase == PHASE_PLAY:
                break
            start.step(action)
        p0 = points_estimate(start.hands, start.trump)
        estimate.append(p0 if i % 2 == 0 else 2 * HALF_POINTS - p0)
    offset = float(np.mean(a_points(games) - np.array(estimate)))
    signs = np.array([1.0, -1.0] * n)
    agents = [make_agent(agent, seed), make_agent(spec, seed)]
    played = [(g, seat_agents(i % 2)) for i, g in enumerate(games)]
    team0, decisions = table_corrections(played, agents, signs * offset)
    corrections = (signs * team0).reshape(n, 2).mean(axis=1)
    x = res.pair_means.astype(np.float64)
    y = x - corrections
    features = deal_features_matrix(deals)
    centred = features - feature_means()
    beta = fit_coefficients(y, features)
    half = n // 2
    b1 = fit_coefficients(y[:half], features[:half])
    b2 = fit_coefficients(y[half:], features[half:])
    out_of_sample = np.concatenate([y[:half] - centred[:half] @ b2, y[half:] - centred[half:] @ b1])
    factor_features = var(y) / var(out_of_sample)
    keep = factor_features >= MIN_FEATURE_GAIN
    final = y - (centred @ beta if keep else 0.0)
    label = DEAL_SETS["dev"].label
    return {
        "beta": [float(b) for b in beta] if keep else [0.0] * len(FEATURES),
        "offset": round(offset, 6),
        "fitted_on": f"{label}: {agent} vs {spec}, first {n} deals, seed {seed}",
        "dev_decisions_corrected": decisions,
        "dev_factor_decisions": var(x) / var(y),
        "dev_factor_features_out_of_sample": factor_features,
        "features_kept": bool(keep),
        "dev_factor": var(x) / var(final),
    }


def fit(args: argparse.Namespace) -> int:
    path = Path(args.fit)
    if path.exists():
        print(f"{path} exists; not overwriting it", file=sys.stderr)
        return 2
    dev = load_deal_set("dev")
    fits = {}
    for name, spec in PANEL.items():
        n = args.search_deals if "search" in spec else args.deals
        start = time.time()
        fits[name] = fit_member(name, spec, args.fit_agent, dev[:n], args.seed, args.workers)
        print(f"{name}: {json.dumps(fits[name])} ({time.time() - start:.0f} s)", flush=True)
    info = DEAL_SETS["dev"]
    data = {
        "version": CV_VERSION,
        "deal_set": info.label,
        "deal_set_sha256": info.sha256,
        "features": list(FEATURES),
        "feature_means": [float(m) for m in feature_means()],
        "package_version": __version__,
        "command": "python benchmarks/variance_decomposition.py " + " ".join(sys.argv[1:]),
        "fits": fits,
    }
    atomic_write_text(path, json.dumps(data, indent=2) + "\n", overwrite=False)
    print(f"wrote {path}")
    return 0


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pair", nargs=2, action="append", metavar=("A", "B"), help="agent specs")
    p.add_argument("--deal-set", default="dev", choices=sorted(DEAL_SETS))
    p.add_argument("--deals", type=int, default=500, help="deals per pair (default 500)")
    p.add_argument(
        "--search-deals", type=int, default=64, help="deals for pairs with a search agent (64)"
    )
    p.add_argument("--seeds", type=int, default=2, help="extra agent seeds per pair (2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--endgame", type=int, default=3, help="tricks played double-dummy (3)")
    p.add_argument("--out", help="write every number to this JSON file (never overwritten)")
    p.add_argument("--fit", metavar="FILE", help="fit the cv1 coefficients on dev_v1 instead")
    p.add_argument("--fit-agent", default=FIT_AGENT, help=f"agent of the fit ({FIT_AGENT})")
    p.add_argument("--solver-cost", action="store_true", help="the solver's cost per position")
    args = p.parse_args(argv)
    if args.fit:
        return fit(args)
    deals_all = load_deal_set(args.deal_set)
    if args.solver_cost:
        for row in solver_cost(deals_all[: args.deals], args.seed):
            print(f"{row['tricks_left']} tricks left: {row['nodes']:.0f} nodes, {row['ms']:.2f} ms")
        return 0
    if args.out and Path(args.out).exists():
        print(f"{args.out} exists; not overwriting it", file=sys.stderr)
        return 2
    pairs = [tuple(pair) for pair in args.pair] if args.pair else list(PAIRS)
    report: dict[str, Any] = {
        "deal_set": DEAL_SETS[args.deal_set].label,
        "seed": args.seed,
        "package_version": __version__,
        "pairs": {},
    }
    per_deal: dict[tuple[str, str], np.ndarray] = {}
    for a, b in pairs:
        n = args.search_deals if "search" in a + b else args.deals
        deals = deals_all[:n]
        start = time.time()
        key = member_key(b)
        try:
            res, games = play(a, b, deals, args.seed, args.workers, key)
            replays = [
                play(a, b, deals, args.seed + k, args.workers, key)[0]
                for k in range(1, args.seeds + 1)
            ]
        except Exception as e:  # one pair failing (an agent that cannot be built) costs only it
            report["pairs"][f"{a} vs {b}"] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{a} vs {b}: FAILED: {type(e).__name__}: {e}", flush=True)
            continue
        figures = decompose(res, games, replays, args.endgame)
        figures["seconds"] = round(time.time() - start, 1)
        report["pairs"][f"{a} vs {b}"] = figures
        per_deal[(a, b)] = res.pair_means.astype(np.float64)
        print(f"{a} vs {b}: {json.dumps(figures)}", flush=True)
    cross = {}
    for (a1, b1), x1 in per_deal.items():
        for (a2, b2), x2 in per_deal.items():
            if a1 == a2 and (a1, b1) < (a2, b2):
                m = min(len(x1), len(x2))
                cross[f"{a1} vs {b1} / {a2} vs {b2}"] = float(np.corrcoef(x1[:m], x2[:m])[0, 1])
    report["correlation_same_agent"] = cross
    print(f"correlations between pairs with the same agent A: {json.dumps(cross)}")
    if args.out:
        atomic_write_text(Path(args.out), json.dumps(report, indent=2) + "\n", overwrite=False)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
