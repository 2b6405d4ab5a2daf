"""Draw docs/learning_curve.png from a train/ppo.py metrics.csv: points/hand vs wall-clock.

    python docs/learning_curve.py runs/ppo_s1/metrics.csv docs/learning_curve.png

Plots the interval evaluations (duplicate deals, greedy policy) against the rule-based
and the random agent, with their 95% confidence bands, over training minutes.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def read_evals(csv_path: Path) -> dict[str, list[float]]:
    """The rows of metrics.csv that carry an evaluation, as float columns."""
    cols = ("minutes", "eval_rule_mean", "eval_rule_ci95", "eval_random_mean", "eval_random_ci95")
    out: dict[str, list[float]] = {c: [] for c in cols}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("eval_rule_mean"):
                continue
            for c in cols:
                out[c].append(float(row[c]) if row.get(c) else float("nan"))
    if not out["minutes"]:
        raise ValueError(f"{csv_path} has no evaluation rows (eval_rule_mean is empty)")
    return out


def plot(csv_path: Path, png_path: Path, title: str | None = None) -> None:
    """Write the figure (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ev = read_evals(csv_path)
    t = np.array(ev["minutes"])
    fig, axes = plt.subplots(2, 1, figsize=(8, 6.5), dpi=120, sharex=True)
    panels = (("rule", "tab:blue", "vs rule-based"), ("random", "tab:orange", "vs random"))
    for ax, (name, color, label) in zip(axes, panels, strict=True):
        m = np.array(ev[f"eval_{name}_mean"])
        ci = np.array(ev[f"eval_{name}_ci95"])
        ax.plot(t, m, color=color, marker="o", ms=2.5, lw=1.2, label=label)
        ax.fill_between(t, m - ci, m + ci, color=color, alpha=0.25, lw=0, label="95% CI")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_ylabel("points per hand")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    axes[-1].set_xlabel("training wall-clock time (minutes, evaluations included)")
    axes[0].set_title(title or "Self-play PPO for Butifarra: greedy policy, duplicate deals")
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="metrics.csv written by train/ppo.py")
    parser.add_argument("png", type=Path, nargs="?", default=Path("docs/learning_curve.png"))
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    plot(args.csv, args.png, args.title)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
