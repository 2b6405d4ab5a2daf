"""The README's main job: ``butifarra demo`` plays a hand and prints the comparison table."""

from __future__ import annotations

import io
import re

import pytest

from agents.evaluation.arena import duel
from agents.evaluation.stats import mean_ci
from agents.registry import make_agent
from butifarra.cli import main
from butifarra.demo import run_demo

ROW = re.compile(
    r"^\| (\w+) +\| (\w+) +\| ([+-]\d+\.\d\d) +\| \[([+-]\d+\.\d\d), ([+-]\d+\.\d\d)\] +\| "
    r"(\d+\.\d)% +\|$",
    flags=re.M,
)


def test_demo_narrates_a_hand_and_prints_the_arena_figures() -> None:
    deals, seed = 24, 3
    out = io.StringIO()
    assert run_demo(deals=deals, seed=seed, workers=1, out=out) == 0
    text = out.getvalue()
    assert len(re.findall(r"^trick +\d+:", text, flags=re.M)) == 12
    points = re.search(r"Points: team A \(0\+2\) (\d+), team B \(1\+3\) (\d+)", text)
    assert points and int(points[1]) + int(points[2]) == 72
    rows = {(m[1], m[2]): m.groups()[2:] for m in ROW.finditer(text)}
    assert ("rule", "random") in rows, text
    for (a, b), (mean, lo, hi, won) in rows.items():
        # every row is exactly what the arena gives for the same agents, deals and seed...
        res = duel(make_agent(a, seed), make_agent(b, seed), deals, seed)
        assert mean == f"{res.mean:+.2f}"
        assert won == f"{100 * res.win_share:.1f}"
        # ...and the interval printed is the t interval of its per-deal means
        m, ci_low, ci_high = mean_ci(res.pair_means)
        assert (lo, hi) == (f"{ci_low:+.2f}", f"{ci_high:+.2f}")
        assert ci_low < m < ci_high
    # the rule-based player beats random clearly: the whole interval is well above zero
    mean, lo, _, won = rows[("rule", "random")]
    assert float(lo) > 10 and float(mean) > 30 and float(won) > 60


def test_demo_is_reproducible_and_rejects_bad_counts(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = io.StringIO(), io.StringIO()
    run_demo(deals=8, seed=5, workers=1, out=a)
    run_demo(deals=8, seed=5, workers=1, out=b)
    assert a.getvalue() == b.getvalue()
    with pytest.raises(SystemExit) as e:
        main(["demo", "-n", "-3"])
    assert e.value.code == 2
    assert "argument -n/--deals: expected an integer from 1 to" in capsys.readouterr().err
    for name, value in (("deals", 0), ("seed", -1), ("workers", 0), ("deals", 2.5)):
        with pytest.raises(ValueError, match=name):
            run_demo(**{name: value}, out=io.StringIO())
