"""Paired comparison: two agents against one opponent on the same deals, differenced per deal."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from agents import RandomAgent, RuleBasedAgent
from agents.evaluation.arena import duel
from agents.evaluation.paired import compare, paired_difference
from agents.registry import make_agent
from butifarra.cli import main


def test_the_same_agent_twice_differs_by_nothing_on_every_deal() -> None:
    # same deals and same opponent seeds: a deterministic candidate replays its baseline
    res = compare(RuleBasedAgent(), RuleBasedAgent(), RandomAgent(), 40, seed=5)
    assert np.all(res.differences == 0)
    assert res.mean == 0 and res.ci_low == 0 and res.ci_high == 0
    assert res.candidate.mean == res.baseline.mean != 0
    assert res.correlation == pytest.approx(1.0)


def test_the_difference_is_the_difference_of_the_two_duels() -> None:
    res = compare(RuleBasedAgent(), RandomAgent(), RandomAgent(), 60, seed=2)
    alone = duel(RuleBasedAgent(), RandomAgent(), 60, seed=2)
    assert np.array_equal(res.candidate.pair_means, alone.pair_means)  # a plain duel
    assert res.mean == pytest.approx(res.candidate.mean - res.baseline.mean)
    assert res.mean > 20 and res.ci_low > 0  # the rule-based player beats random play


def test_pairing_two_close_agents_narrows_the_interval() -> None:
    # two PPO releases against the rule-based player: the deals that favour one favour the
    # other, so the paired interval is narrower than two independent runs would give
    res = compare(make_agent("ppo", 0), make_agent("ppo-r7", 0), RuleBasedAgent(), 200, seed=11)
    assert res.correlation > 0.2
    assert res.ci_half_width < res.unpaired_half_width
    assert res.variance_factor > 1.2
    assert res.baseline.name_a == "ppo#2"  # the same agent name is told apart


def test_duels_on_different_deals_or_opponents_are_refused() -> None:
    a = duel(RuleBasedAgent(), RandomAgent(), 30, seed=1)
    with pytest.raises(ValueError, match="same seed"):
        paired_difference(a, duel(RandomAgent(), RandomAgent(), 30, seed=2))
    with pytest.raises(ValueError, match="same deals, at least two: the candidate's has 30"):
        paired_difference(a, duel(RandomAgent(), RandomAgent(), 31, seed=1))
    with pytest.raises(ValueError, match="same opponent"):
        paired_difference(a, duel(RandomAgent(), RuleBasedAgent(), 30, seed=1))
    other = duel(RandomAgent(), RandomAgent(), 30, seed=1, deal_fn=_dealer_zero)
    with pytest.raises(ValueError, match="not played on the same deals"):
        paired_difference(a, other)
    with pytest.raises(ValueError, match="must be a DuelResult"):
        paired_difference(a, a.to_dict())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="three non-empty strings"):
        compare(RuleBasedAgent(), RandomAgent(), RandomAgent(), 4, names=("a", "b"))  # type: ignore[arg-type]


class _NoHands(RuleBasedAgent):
    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        raise AssertionError("a hand was played")


def test_a_bad_baseline_is_refused_before_any_hand() -> None:
    # a candidate that fails on its first decision: the baseline's error must come first
    with pytest.raises(ValueError, match="baseline"):
        compare(_NoHands(), "nosuchagent", RandomAgent(), 4)


def _dealer_zero(rng: np.random.Generator) -> tuple[int, list[int]]:
    from butifarra_env.core.rules import random_deal

    return 0, random_deal(rng, 0)


def test_cli_baseline_prints_both_duels_and_writes_per_deal_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    args = ["arena", "rule", "random", "-n", "20", "--seed", "4", "--no-progress"]
    assert main([*args, "--baseline", "random", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rule minus random#2, both against random on the same 20 duplicate deals" in text
    card = json.loads(out.with_suffix(".json").read_text())
    diff = card["difference"]
    assert card["candidate"]["agent_a"] == "rule" and card["baseline"]["agent_a"] == "random#2"
    assert diff["points_per_hand"] == pytest.approx(
        card["candidate"]["mean"] - card["baseline"]["mean"]
    )
    rows = list(csv.DictReader(out.with_suffix(".csv").open()))
    assert len(rows) == 20 and list(rows[0]) == ["deal", "rule", "random#2", "difference"]
    assert np.mean([float(r["difference"]) for r in rows]) == pytest.approx(diff["points_per_hand"])
    # the files are never overwritten
    assert main([*args, "--baseline", "random", "--out", str(out)]) != 0
    assert "cmp.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "rule", "rule", "random", "random"], "--baseline is for two agents"),
        (["--baseline", "rule", "--matches", "2", "rule", "random"], "not with --matches"),
        (["--baseline", "rule", "--importance", "4", "rule", "random"], "or --importance"),
        (["--baseline", "nosuchagent", "rule", "random"], "argument --baseline: "),
    ],
)
def test_cli_baseline_bad_input(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x"
    args = ["arena", "-n", "4", "--no-progress", "--out", str(out), *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
