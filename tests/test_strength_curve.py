"""The strength-against-compute curve: the interquartile mean over seeds with its bootstrap
interval (:mod:`agents.evaluation.aggregate`) and ``benchmarks/strength_curve.py``, which
evaluates a run's milestone models and keeps what it measured when run again."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")
pytest.importorskip("torch")

from agents.evaluation.aggregate import aggregate_seeds, iqm  # noqa: E402
from tests.test_ppo import tiny_config  # noqa: E402
from tests.test_ppo_schedules import Clock  # noqa: E402
from train.ppo import train  # noqa: E402


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    # 8 seeds: the two lowest and the two highest are cut, whatever they are
    assert iqm([-100, 1, 2, 3, 4, 5, 6, 1000]) == pytest.approx((2 + 3 + 4 + 5) / 4)
    assert iqm([7, -3, 5, 0, 100, 2, 4, 3]) == pytest.approx((2 + 3 + 4 + 5) / 4)
    # below four seeds nothing is cut
    assert iqm([1.0, 2.0, 6.0]) == pytest.approx(3.0)


def test_bootstrap_interval_over_seeds() -> None:
    agg = aggregate_seeds([2.0, 3.0, 4.0, 3.5, 2.5], seed=7)
    assert agg.iqm == pytest.approx(iqm([2.0, 3.0, 4.0, 3.5, 2.5]))
    assert 2.0 < agg.ci_low < agg.iqm < agg.ci_high < 4.0
    assert aggregate_seeds([2.0, 3.0, 4.0, 3.5, 2.5], seed=7) == agg  # same seed, same interval
    # shifting every seed shifts the interval; spreading them widens it
    shifted = aggregate_seeds([12.0, 13.0, 14.0, 13.5, 12.5], seed=7)
    assert shifted.ci_low == pytest.approx(agg.ci_low + 10)
    assert shifted.ci_high == pytest.approx(agg.ci_high + 10)
    wide = aggregate_seeds([0.0, 3.0, 6.0, 4.5, 1.5], seed=7)
    assert wide.ci_high - wide.ci_low > 2 * (agg.ci_high - agg.ci_low)
    # one seed: no interval; equal seeds: a point
    assert np.isnan(aggregate_seeds([3.0]).ci_low)
    assert aggregate_seeds([3.0, 3.0, 3.0]).ci_low == 3.0


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"scores": []}, "non-empty"),
        ({"scores": [1.0, float("nan")]}, "finite"),
        ({"scores": ["a", "b"]}, "numbers"),
        ({"scores": [[1.0, 2.0]]}, "1-D"),
        ({"scores": [1.0, 2.0], "level": 1.0}, "level"),
        ({"scores": [1.0, 2.0], "n_resamples": 10}, "n_resamples"),
        ({"scores": [1.0, 2.0], "seed": -1}, "seed"),
    ],
)
def test_bad_input_is_named(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        aggregate_seeds(**kw)  # type: ignore[arg-type]


def test_curve_evaluates_each_model_once_and_keeps_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tiny runs with a milestone each: every model is played once against rule; run
    again, nothing is replayed and the rows are kept; an IQM row per minute all runs hold."""
    from benchmarks import strength_curve

    for seed in (1, 2):
        cfg = tiny_config(tmp_path, run_name=f"s{seed}", seed=seed, total_updates=3,
                          milestone_minutes=(1.0,))  # fmt: skip
        train(cfg, clock=Clock(30.0))
    runs = [tmp_path / "s1", tmp_path / "s2"]
    assert [m for m, _ in strength_curve.run_models(runs[0])] == [1.0, 1.5]

    import agents.evaluation.arena as arena

    played: list[tuple[str, int]] = []
    real_duel = arena.duel

    def counting_duel(a, b, n, **kw):  # type: ignore[no-untyped-def]
        played.append((a, n))
        return real_duel(a, b, n, **kw)

    monkeypatch.setattr(arena, "duel", counting_duel)
    out = tmp_path / "curve.csv"
    argv = [*map(str, runs), "--deals", "6", "--final-deals", "8", "--out", str(out)]
    assert strength_curve.main(argv) == 0
    assert sorted(played) == sorted(
        [(f"ppo:{r / 'model_at_1min.pt'}", 6) for r in runs]
        + [(f"ppo:{r / 'checkpoint.pt'}", 8) for r in runs]
    )
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    seeds = [r for r in rows if r["kind"] == "seed"]
    assert len(seeds) == 4 and {r["deals"] for r in seeds} == {"6", "8"}
    first = {(r["model"], r["mean"]) for r in seeds}
    iqms = {r["minutes"]: r for r in rows if r["kind"] == "iqm"}
    assert set(iqms) == {"1", "1.5"}  # the milestone, and the end (3 updates of 30 s)
    for minute in ("1", "1.5"):
        scores = [float(r["mean"]) for r in seeds if r["minutes"] == minute]
        assert float(iqms[minute]["mean"]) == pytest.approx(iqm(scores), abs=1e-4)

    played.clear()
    assert strength_curve.main(argv) == 0
    assert played == []  # nothing measured twice
    again = [r for r in strength_curve.read_curve(out) if r["kind"] == "seed"]
    assert {(r["model"], r["mean"]) for r in again} == first


def test_the_end_of_a_run_is_labelled_with_the_time_it_ran(tmp_path: Path) -> None:
    """A run that spent its time budget ends at the budget's point; one stopped before it
    (here by an update budget, as by Ctrl-C) at the minutes it ran, not at the budget."""
    from benchmarks import strength_curve

    spent = tiny_config(tmp_path, run_name="spent", total_minutes=1.2, total_updates=0)
    stopped = tiny_config(tmp_path, run_name="stopped", total_minutes=60.0, total_updates=3)
    for cfg in (spent, stopped):
        train(cfg, clock=Clock(30.0))
    assert strength_curve.run_models(tmp_path / "spent")[-1][0] == 1.2
    assert strength_curve.run_models(tmp_path / "stopped")[-1][0] == 1.5
