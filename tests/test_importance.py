"""Importance-sampled estimates (is1): unbiased on fixed results where the unweighted mean is
not, intervals that cover the population mean (the pool's own sampling included), the
bidding pass finds the multipliers the plays reach, reproducible draws, bad input refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents import RuleBasedAgent
from agents.evaluation.arena import bid_multipliers, duel
from agents.evaluation.deal_sets import load_deal_set
from agents.evaluation.importance import (
    deal_scale,
    draw_deals,
    estimate,
    importance_duel,
)
from agents.table import Table, play_tables
from butifarra.cli import main
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import PHASE_PLAY, random_deal


def synthetic_pool(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Scales and per-deal results shaped like the arena's: multipliers 1-16, a result whose
    spread and mean grow with the multiplier (so the high-multiplier deals pull the mean)."""
    m = rng.choice([1, 2, 4, 16], size=(n, 2), p=[0.6, 0.25, 0.1, 0.05])
    m[:, 1] = np.where(rng.random(n) < 0.8, m[:, 0], m[:, 1])  # mostly bid alike
    s = deal_scale(m)
    d = s * (1.0 + 4.0 * rng.standard_normal(n))
    return s, d


def test_the_scale_is_the_root_mean_square_of_the_two_multipliers() -> None:
    assert deal_scale(np.array([[1, 1], [2, 4], [16, 16]])).tolist() == pytest.approx(
        [1.0, np.sqrt(10.0), 16.0]
    )
    for bad in (np.array([[0, 1]]), np.array([1, 2]), np.zeros((0, 2))):
        with pytest.raises(ValueError, match="multipliers must be an \\(n, 2\\) array"):
            deal_scale(bad)


def test_draws_follow_the_scale_and_depend_on_the_seed_alone() -> None:
    scale = np.array([1.0, 1.0, 2.0, 4.0])
    drawn = draw_deals(scale, 80_000, seed=5)
    shares = np.bincount(drawn, minlength=4) / len(drawn)
    assert shares == pytest.approx(scale / scale.sum(), abs=0.01)
    assert np.array_equal(drawn, draw_deals(scale, 80_000, seed=5))
    assert not np.array_equal(drawn[:100], draw_deals(scale, 100, seed=6))


def test_the_weighted_mean_is_unbiased_where_the_unweighted_one_is_not() -> None:
    """On one fixed pool: over many independent draws, the is1 mean averages to the pool's
    mean, and the plain mean of the drawn deals (no weights) is far off: the test can tell."""
    s, d = synthetic_pool(np.random.default_rng(0), 400)
    reps, k = 3000, 40
    weighted, unweighted = np.empty(reps), np.empty(reps)
    for r in range(reps):
        idx = draw_deals(s, k, seed=r)
        weighted[r] = estimate(d[idx], s[idx], float(s.mean()), len(s)).mean
        unweighted[r] = d[idx].mean()
    se = weighted.std(ddof=1) / np.sqrt(reps)
    assert abs(weighted.mean() - d.mean()) < 4 * se
    assert abs(unweighted.mean() - d.mean()) > 20 * se


def test_the_interval_covers_the_population_mean_and_needs_the_pool_term() -> None:
    """A fresh pool per repetition (uniform dealing), a small one (the draws are half of it):
    95% intervals cover the population's mean in about 95% of repetitions. Without the pool's
    own sampling term (the interval over the draws alone) they would cover far less."""
    rng = np.random.default_rng(1)
    truth = float(np.mean(synthetic_pool(np.random.default_rng(99), 2_000_000)[1]))
    reps, n, k = 1000, 200, 100
    covered = narrow_covered = 0
    for r in range(reps):
        s, d = synthetic_pool(rng, n)
        idx = draw_deals(s, k, seed=r)
        est = estimate(d[idx], s[idx], float(s.mean()), n)
        covered += est.ci_low <= truth <= est.ci_high
        y = d[idx] * s.mean() / s[idx]
        half = 1.984 * y.std(ddof=1) / np.sqrt(k)  # the draws alone
        narrow_covered += abs(y.mean() - truth) <= half
    assert 0.92 <= covered / reps <= 0.98
    assert narrow_covered / reps < 0.90


def test_the_factor_is_the_plain_variance_over_the_draws_variance() -> None:
    """Results exactly proportional to the scale: every draw's y is the same number, so the
    estimate is exact given the pool, and the factor is infinite."""
    s = deal_scale(np.array([[1, 1], [2, 2], [4, 4], [8, 8]] * 25))
    d = 3.0 * s
    idx = draw_deals(s, 50, seed=0)
    est = estimate(d[idx], s[idx], float(s.mean()), len(s))
    assert est.mean == pytest.approx(d.mean())
    assert est.variance_factor == float("inf")
    assert est.equivalent_deals == pytest.approx(len(s), rel=0.3)  # the pool term is left


def test_play_tables_stops_each_hand_when_the_card_play_starts() -> None:
    rng = np.random.default_rng(3)
    tables = [Table([0, 0, 0, 0], f"t{i}") for i in range(5)]
    play_tables(
        tables,
        [RuleBasedAgent()],
        lambda t: None if t.hands_done else Game(Options(), 0, random_deal(rng, 0)),
        until=lambda g: g.phase == PHASE_PLAY,
    )
    for t in tables:
        (g,) = t.hands_done
        assert g.phase == PHASE_PLAY and not g.is_over and g.multiplier >= 1


@pytest.fixture
def pool() -> list[tuple[int, list[int]]]:
    return load_deal_set("dev")[:320]


def test_the_pass_finds_the_multipliers_the_duel_plays_at(pool: list) -> None:
    multipliers = bid_multipliers("ppo", "rule", pool, seed=0)
    played = duel("ppo", "rule", len(pool), seed=0, deals=pool)
    assert np.array_equal(multipliers, played.hands["multiplier"].reshape(-1, 2))
    assert (multipliers > 1).any()


def test_importance_duel_is_reproducible_and_agrees_with_the_plain_mean(pool: list) -> None:
    one = importance_duel("ppo", "rule", len(pool), 200, seed=4, deals=pool)
    two = importance_duel("ppo", "rule", len(pool), 200, seed=4, deals=pool, workers=2)
    same = ("mean", "ci_low", "ci_high", "variance_factor", "equivalent_deals")
    assert [getattr(one.estimate, f) for f in same] == [getattr(two.estimate, f) for f in same]
    assert np.array_equal(one.drawn, two.drawn)
    assert np.array_equal(one.played.pair_means, two.played.pair_means)
    # the draws favour the high-multiplier deals, and the played ones bid as in the pass
    assert one.multipliers[one.drawn].mean() > one.multipliers.mean()
    assert np.array_equal(one.played.hands["multiplier"].reshape(-1, 2), one.multipliers[one.drawn])
    plain = duel("ppo", "rule", len(pool), seed=4, deals=pool)
    gap = abs(one.estimate.mean - plain.mean)
    assert gap < 2 * np.hypot(one.estimate.ci_half_width, plain.ci_half_width)
    assert one.estimate.variance_factor > 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pool": 0}, "pool must be"),
        ({"draws": 1}, "draws must be"),
        ({"draws": "10"}, "draws must be"),
        ({"pool": 10, "deals": "abc"}, "deals must be a list"),
        ({"pool": 10, "deals": load_deal_set("dev")[:5]}, r"pool must be at most len\(deals\) = 5"),
        ({"seed": -1}, "seed must be"),
        ({"workers": 0}, "workers must be"),
        ({"names": ("a",)}, "names must be two non-empty strings"),
        ({"records_path": ""}, "records_path"),
    ],
)
def test_bad_arguments_are_refused_before_any_hand(kwargs: dict, match: str) -> None:
    args = {"agent_a": "rule", "agent_b": "random", "pool": 10, "draws": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        importance_duel(**args)


def test_the_arena_command_gives_the_estimate_and_writes_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "is"
    args = ["arena", "rule", "random", "-n", "100", "--importance", "40", "--seed", "2"]
    assert main([*args, "--no-progress", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "importance-sampled (is1)" in text and "40 deals played of a pool of 100" in text
    card = json.loads((tmp_path / "is.json").read_text())["importance"]
    assert card["version"] == "is1" and card["pool"] == 100 and card["draws"] == 40
    same = importance_duel("rule", "random", 100, 40, seed=2).estimate  # the API, same run
    assert (card["points_per_hand"], card["ci_low"], card["ci_high"]) == pytest.approx(
        (same.mean, same.ci_low, same.ci_high)
    )
    assert (tmp_path / "is.csv").read_text().count("\n") == 1 + 2 * 40
    for bad, message in (
        (["arena", "rule", "random", "ppo", "--importance", "5"], "for two agents"),
        (["arena", "rule", "random", "--importance", "5", "--matches", "2"], "not both"),
    ):
        assert main(bad) == 2
        assert message in capsys.readouterr().err
