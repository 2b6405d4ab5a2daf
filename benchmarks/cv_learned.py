"""Could a learned function of the deal be the control variate of a deterministic pair?

Between agents that decide deterministically a duplicate deal's result ``D`` is a fixed
function of the deal, so the only unbiased correction left is ``g(deal)`` with a known mean
(docs/evaluation.md, "Why the leaderboard pairs get no reduction from cv1"). ``g`` need not
be hand-made: any function of the deal fitted on other deals will do, and its mean can be
estimated on as many fresh deals as one likes when ``g`` is cheap. The variance it removes
is the share of ``D`` that ``g`` predicts: ``1 / (1 - R^2)`` times fewer deals, so the 4x
of issue 29 needs ``R^2 >= 0.75`` on deals not fitted on.

This script measures that ceiling. It plays ``--deals`` fresh uniform deals of each pair
(seeded by ``--seed``), then fits on the first 80% and reports the held-out factor
``var(D) / var(D - beta g)`` (``beta`` from the fitting deals) for three inputs:

* ``cards``: the four hands as seen from the dealer (4 x 48 one-hot), all a deal is;
* ``bid``: what the pair's bidding pass gives before the first card (both plays'
  multipliers, trumps, choosing team, delegation, doubling level: the is1 pass); its mean
  would be estimated on more deals run through the pass, which is not free;
* ``cards+bid``: both;

each by ridge regression and by a two-layer MLP (early stopping on a tenth of the fitting
deals). Nothing is shipped from it; it says how far such a correction can go.

    python benchmarks/cv_learned.py --pair ppo rule --pair ppo ppo-r1 --deals 40000
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from agents.evaluation.arena import DuelResult, duel, uniform_deal
from agents.evaluation.deal_sets import Deal
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.fileio import atomic_write_text
from butifarra_env.core.rules import card_bits_array

FIT_SHARE = 0.8
"""Deals fitted on (the first ones); the rest are held out."""


def deal_inputs(deals: list[Deal]) -> np.ndarray:
    """The four hands, mano first and the dealer last (a duplicate result does not change
    when the deal is turned round the table), as 4 x 48 zeros and ones."""
    masks = np.array(
        [[hands[(dealer + 1 + k) % 4] for k in range(4)] for dealer, hands in deals], np.uint64
    ).reshape(len(deals), 4)
    return card_bits_array(masks).astype(np.float32).reshape(len(deals), 4 * N_CARDS)


def bidding_inputs(result: DuelResult) -> np.ndarray:
    """Per deal, both plays' bidding outcome: multiplier (scaled and as log2), trump (one-hot
    over the four suits and butifarra), choosing team, delegation and doubling level."""
    hands, n = result.hands, result.n_deals
    cols = []
    mult = hands["multiplier"].reshape(n, 2).astype(np.float32)
    cols += [mult / 8, np.log2(mult)]
    trump = hands["trump"].reshape(n, 2)
    cols += [(trump == t).astype(np.float32) for t in range(5)]
    for name in ("chooser_team", "delegated", "doubling_level"):
        cols.append(hands[name].reshape(n, 2).astype(np.float32))
    return np.concatenate(cols, axis=1)


def held_out_factor(d: np.ndarray, g: np.ndarray, n_fit: int) -> float:
    """var(D) / var(D - beta g) on the held-out deals, beta fitted on the others."""
    c = np.cov(d[:n_fit], g[:n_fit])
    beta = c[0, 1] / c[1, 1] if c[1, 1] > 0 else 0.0
    return float(np.var(d[n_fit:]) / np.var(d[n_fit:] - beta * g[n_fit:]))


def ridge(x: np.ndarray, d: np.ndarray, n_fit: int, alpha: float = 10.0) -> np.ndarray:
    xa = np.concatenate([x, np.ones((len(x), 1), np.float32)], axis=1).astype(np.float64)
    a = xa[:n_fit].T @ xa[:n_fit] + alpha * np.eye(xa.shape[1])
    w = np.linalg.solve(a, xa[:n_fit].T @ d[:n_fit])
    return np.asarray(xa @ w)


def mlp(x: np.ndarray, d: np.ndarray, n_fit: int, seed: int, epochs: int = 60) -> np.ndarray:
    """A 256-256 MLP fitted to D / sd(D) on the fitting deals, the epoch with the lowest
    loss on their last tenth kept."""
    torch.manual_seed(seed)
    xt = torch.tensor(x)
    scale = float(d[:n_fit].std())
    yt = torch.tensor(d / scale, dtype=torch.float32)
    net = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1),
    )  # fmt: skip
    opt = torch.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4)
    n_val = n_fit // 10
    fit_rows, val_rows = np.arange(n_fit - n_val), torch.arange(n_fit - n_val, n_fit)
    rng = np.random.default_rng(seed)
    best, best_state = float("inf"), {k: v.clone() for k, v in net.state_dict().items()}
    for _ in range(epochs):
        order = torch.as_tensor(rng.permutation(fit_rows))
        for start in range(0, len(order), 256):
            rows = order[start : start + 256]
            loss = ((net(xt[rows]).squeeze(1) - yt[rows]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            val = float(((net(xt[val_rows]).squeeze(1) - yt[val_rows]) ** 2).mean())
        if val < best:
            best, best_state = val, {k: v.clone() for k, v in net.state_dict().items()}
    net.load_state_dict(best_state)
    with torch.no_grad():
        return np.asarray(net(xt).squeeze(1).numpy(), dtype=np.float64) * scale


def measure(a: str, b: str, n: int, seed: int, workers: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    deals = [uniform_deal(rng) for _ in range(n)]
    started = time.perf_counter()
    result = duel(a, b, n, seed=0, deals=deals, workers=workers)
    seconds = time.perf_counter() - started
    d = result.pair_means.astype(np.float64)
    cards, bid = deal_inputs(deals), bidding_inputs(result)
    n_fit = int(FIT_SHARE * n)
    row: dict[str, object] = {
        "pair": f"{a} vs {b}", "deals": n, "held_out": n - n_fit, "mean": result.mean,
        "ci_low": result.ci_low, "ci_high": result.ci_high, "sd": float(d.std(ddof=1)),
        "play_seconds": seconds, "zero_share": float(np.mean(d == 0)),
    }  # fmt: skip
    for name, x in (("cards", cards), ("bid", bid), ("cards+bid", np.hstack([cards, bid]))):
        row[f"{name}_ridge"] = held_out_factor(d, ridge(x, d, n_fit), n_fit)
        row[f"{name}_mlp"] = held_out_factor(d, mlp(x, d, n_fit, seed), n_fit)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", nargs=2, action="append", metavar=("A", "B"))
    parser.add_argument("--deals", type=int, default=40000)
    parser.add_argument("--seed", type=int, default=20261205, help="seeds the deals and fits")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, help="a JSON file for the rows (never overwritten)")
    args = parser.parse_args(argv)
    if args.deals < 100:
        parser.error(
            f"--deals must be at least 100 (a held-out fifth to measure on), got {args.deals}"
        )
    if args.out is not None and args.out.exists():
        parser.error(f"--out {args.out} exists; name a new file")
    torch.set_num_threads(1)
    rows = []
    for a, b in args.pair or [("ppo", "rule"), ("ppo", "ppo-r1")]:
        row = measure(a, b, args.deals, args.seed, args.workers)
        rows.append(row)
        print(
            f"{row['pair']}: {args.deals} deals ({row['held_out']} held out), mean "
            f"{row['mean']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}], "
            f"sd {row['sd']:.1f}; "
            "held-out variance factor (ridge / MLP): "
            + ", ".join(
                f"{k} {row[f'{k}_ridge']:.2f}x / {row[f'{k}_mlp']:.2f}x"
                for k in ("cards", "bid", "cards+bid")
            ),
            flush=True,
        )
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(rows, indent=1) + "\n", overwrite=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
