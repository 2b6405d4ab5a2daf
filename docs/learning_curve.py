"""Draw a learning-curve figure from train/ppo.py metrics.csv files: points/hand vs wall-clock.

    python docs/learning_curve.py runs/ppo_s1/metrics.csv runs/ppo_s2/metrics.csv \\
        --labels "seed 1" "seed 2" --reference docs/ppo_r1_evals.csv --targets \\
        --out docs/learning_curve.png

Plots the interval evaluations (duplicate deals, greedy policy) against the rule-based and
the random agent, with their 95% confidence bands, over training minutes: one line per run,
an optional reference run in grey (``--reference``), and the issue-14 targets as dashed
lines (``--targets``: +3.0 against rule-based at 60 minutes, +30 against random by 10).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

COLUMNS = ("minutes", "eval_rule_mean", "eval_rule_ci95", "eval_random_mean", "eval_random_ci95")
TARGETS = {"rule": (60.0, 3.0), "random": (10.0, 30.0)}
"""Panel -> (minutes, points/hand) of the targets drawn with ``--targets``."""


def read_evals(csv_path: Path) -> dict[str, list[float]]:
    """The rows of metrics.csv that carry an evaluation, as float columns."""
    out: dict[str, list[float]] = {c: [] for c in COLUMNS}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("eval_rule_mean"):
                continue
            for c in COLUMNS:
                out[c].append(float(row[c]) if row.get(c) else float("nan"))
    if not out["minutes"]:
        raise ValueError(f"{csv_path} has no evaluation rows (eval_rule_mean is empty)")
    return out


def plot(
    csv_paths: list[Path],
    png_path: Path,
    labels: list[str] | None = None,
    reference: Path | None = None,
    reference_label: str = "previous shipped run",
    targets: bool = False,
    title: str | None = None,
) -> None:
    """Write the figure (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if labels is not None and len(labels) != len(csv_paths):
        raise ValueError(f"{len(labels)} labels for {len(csv_paths)} CSV files")
    names = labels or [p.parent.name or p.stem for p in csv_paths]
    runs = [
        (read_evals(p), name, f"C{i}")
        for i, (p, name) in enumerate(zip(csv_paths, names, strict=True))
    ]
    if reference is not None:
        runs.insert(0, (read_evals(reference), reference_label, "tab:grey"))
    fig, axes = plt.subplots(2, 1, figsize=(8, 6.5), dpi=120, sharex=True)
    for ax, panel in zip(axes, ("rule", "random"), strict=True):
        for ev, name, color in runs:
            t = np.array(ev["minutes"])
            m = np.array(ev[f"eval_{panel}_mean"])
            ci = np.array(ev[f"eval_{panel}_ci95"])
            ax.plot(t, m, color=color, marker="o", ms=2, lw=1.1, label=name)
            ax.fill_between(t, m - ci, m + ci, color=color, alpha=0.18, lw=0)
        if targets:
            minutes, points = TARGETS[panel]
            ax.axhline(points, color="black", ls="--", lw=0.8)
            ax.axvline(minutes, color="black", ls=":", lw=0.8)
            ax.annotate(
                f"target {points:+g} at {minutes:g} min", (0.01, points), fontsize=8,
                xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points",
            )  # fmt: skip
        ax.axhline(0, color="black", lw=0.6)
        ax.set_ylabel(f"points/hand vs {'rule-based' if panel == 'rule' else 'random'}")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    axes[-1].set_xlabel("training wall-clock time (minutes, evaluations included)")
    axes[0].set_title(title or "PPO for Butifarra: greedy policy, duplicate deals, 95% CI bands")
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "csv", type=Path, nargs="+", help="metrics.csv files written by train/ppo.py"
    )
    parser.add_argument("--out", type=Path, default=Path("docs/learning_curve.png"))
    parser.add_argument("--labels", nargs="+", default=None, help="one legend label per CSV")
    parser.add_argument("--reference", type=Path, default=None, help="a run drawn in grey")
    parser.add_argument("--reference-label", default="previous shipped run")
    parser.add_argument("--targets", action="store_true", help="draw the issue-14 targets")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"{args.out} exists; pass another --out (nothing was overwritten)")
    plot(
        args.csv, args.out, args.labels, args.reference, args.reference_label, args.targets,
        args.title,
    )  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
