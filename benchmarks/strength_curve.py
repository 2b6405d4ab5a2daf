"""Strength against compute: points/hand against the rule-based player at 5-60 minutes.

Each training run given (``train.ppo --milestone-minutes 5 10 20 40 --total-minutes 60``)
keeps its model as it was at each milestone (``model_at_{M}min.pt``) and at the end
(``checkpoint.pt``: the point of the run's time budget, or of its elapsed minutes). Every model
plays ``--deals`` duplicate deals against ``rule`` (``--final-deals`` for the last), the same
deals for all (arena seed ``--seed``); per minute, the seeds are summarised by their
interquartile mean with a 95% percentile bootstrap interval over seeds
(:mod:`agents.evaluation.aggregate`).

    python benchmarks/strength_curve.py runs/r6_s1 runs/r6_s2 runs/r6_s3 \\
        --deals 5000 --final-deals 20000 --out docs/strength_curve_r6.csv \\
        --plot docs/strength_curve_r6.png

``--out`` is a CSV with one row per evaluated model (``kind=seed``) and one per minute
(``kind=iqm``). An existing file is kept: its rows are read back, only the models not yet
in it are played, and the file is replaced atomically with old and new rows, so an
interrupted run continues where it stopped and nothing measured is lost. Notebook 02 draws
the figure from the CSV (:func:`read_curve`, :func:`plot_curve`).
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

FIELDS = (
    "kind",
    "run",
    "minutes",
    "model",
    "opponent",
    "deals",
    "arena_seed",
    "mean",
    "ci_low",
    "ci_high",
    "n_seeds",
)
MILESTONE = re.compile(r"model_at_(\d+(?:\.\d+)?)min\.pt$")


def run_models(run: Path) -> list[tuple[float, Path]]:
    """``(minutes, model file)`` of one run, in time order: its milestones, then the end."""
    if not run.is_dir():
        raise ValueError(f"{run} is not a run folder (train.ppo's runs/NAME)")
    found = []
    for p in run.iterdir():
        m = MILESTONE.search(p.name)
        if m:
            found.append((float(m.group(1)), p))
    final = run / "checkpoint.pt"
    if final.is_file():
        import torch

        data = torch.load(final, map_location="cpu", weights_only=True)
        budget = float(data.get("config", {}).get("total_minutes", 0.0) or 0.0)
        elapsed = float(data.get("elapsed_s", 0.0)) / 60.0
        # a run that spent its time budget ends just past it: its end is the budget's point;
        # one stopped earlier (Ctrl-C, an update budget) is labelled with the time it ran
        found.append((budget if 0 < budget <= elapsed else round(elapsed, 2), final))
    if not found:
        raise ValueError(f"{run} holds no model_at_*min.pt nor checkpoint.pt")
    return sorted(found)


def read_curve(path: str | Path) -> list[dict[str, str]]:
    """The rows of a curve CSV (both kinds)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and set(FIELDS) - set(rows[0]):
        raise ValueError(
            f"{path} is not a strength-curve CSV: it lacks {set(FIELDS) - set(rows[0])}"
        )
    return rows


def iqm_rows(seed_rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """One ``kind=iqm`` row per minute that every run holds."""
    from agents.evaluation.aggregate import aggregate_seeds

    by_minute: dict[float, dict[str, float]] = {}
    for r in seed_rows:
        by_minute.setdefault(float(r["minutes"]), {})[r["run"]] = float(r["mean"])
    runs = {r["run"] for r in seed_rows}
    out: list[dict[str, str]] = []
    for minute, scores in sorted(by_minute.items()):
        if set(scores) != runs:
            continue
        agg = aggregate_seeds([scores[k] for k in sorted(scores)], seed=round(100 * minute))
        out.append(
            {"kind": "iqm", "run": "", "minutes": f"{minute:g}", "model": "", "opponent": "rule",
             "deals": "", "arena_seed": "", "mean": f"{agg.iqm:.4f}",
             "ci_low": f"{agg.ci_low:.4f}", "ci_high": f"{agg.ci_high:.4f}",
             "n_seeds": str(len(scores))}
        )  # fmt: skip
    return out


def plot_curve(rows: Sequence[dict[str, str]], png: str | Path | None = None, ax=None):  # type: ignore[no-untyped-def]
    """Each seed's points (thin) and the IQM with its bootstrap band; returns the axes."""
    import matplotlib

    if png is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.8))
    seeds = [r for r in rows if r["kind"] == "seed"]
    for run in sorted({r["run"] for r in seeds}):
        pts = sorted((float(r["minutes"]), float(r["mean"])) for r in seeds if r["run"] == run)
        ax.plot(*zip(*pts, strict=True), "o-", lw=0.8, ms=3, alpha=0.6, label=Path(run).name)
    agg = sorted(
        (float(r["minutes"]), float(r["mean"]), float(r["ci_low"]), float(r["ci_high"]))
        for r in rows
        if r["kind"] == "iqm"
    )
    if agg:
        m, c, lo, hi = (np.array(v) for v in zip(*agg, strict=True))
        ax.fill_between(m, lo, hi, color="black", alpha=0.12, label="95% bootstrap interval")
        ax.plot(m, c, "k-", lw=2, label="IQM over seeds")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("training minutes (one core)")
    ax.set_ylabel("points/hand vs rule-based")
    ax.legend(fontsize=8)
    if png is not None:
        ax.figure.tight_layout()
        ax.figure.savefig(png, dpi=110)
    return ax


def _csv_text(rows: Sequence[dict[str, str]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="train.ppo run folders, one per seed")
    ap.add_argument("--deals", type=int, default=5000, help="duplicate deals per milestone model")
    ap.add_argument("--final-deals", type=int, default=20000, help="duplicate deals for the end")
    ap.add_argument("--seed", type=int, default=2026, help="arena seed (the same deals for all)")
    ap.add_argument("--workers", type=int, default=1, help="arena processes")
    ap.add_argument("--out", type=Path, required=True, help="curve CSV (kept and extended)")
    ap.add_argument("--plot", type=Path, help="also draw the figure to this PNG")
    args = ap.parse_args(argv)

    from agents.evaluation.arena import duel
    from butifarra_env.core.fileio import atomic_write_text, check_can_create

    for name in ("deals", "final_deals", "workers"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    check_can_create(args.out)
    plan = [(run, m, p) for run in args.runs for m, p in run_models(run)]
    old = read_curve(args.out) if args.out.exists() else []
    rows = [r for r in old if r["kind"] == "seed"]
    done = {(r["model"], int(r["deals"]), int(r["arena_seed"])) for r in rows}
    for run, minutes, path in plan:
        last = path.name == "checkpoint.pt"
        n = args.final_deals if last else args.deals
        if (str(path), n, args.seed) in done:
            continue
        t0 = time.perf_counter()
        res = duel(f"ppo:{path}", "rule", n, seed=args.seed, workers=args.workers)
        rows.append(
            {"kind": "seed", "run": str(run), "minutes": f"{minutes:g}", "model": str(path),
             "opponent": "rule", "deals": str(n), "arena_seed": str(args.seed),
             "mean": f"{res.mean:.4f}", "ci_low": f"{res.ci_low:.4f}",
             "ci_high": f"{res.ci_high:.4f}", "n_seeds": ""}
        )  # fmt: skip
        print(
            f"{run.name} {minutes:g} min: {res.mean:+.2f} [{res.ci_low:+.2f}, "
            f"{res.ci_high:+.2f}] over {n} deals ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        # after every model, so that an interruption keeps what was measured
        atomic_write_text(args.out, _csv_text(rows))
    summary = iqm_rows(rows)
    atomic_write_text(args.out, _csv_text(rows + summary))
    for r in summary:
        print(
            f"IQM over {r['n_seeds']} seeds at {r['minutes']} min: {float(r['mean']):+.2f} "
            f"[{float(r['ci_low']):+.2f}, {float(r['ci_high']):+.2f}]"
        )
    if args.plot:
        plot_curve(rows + summary, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
