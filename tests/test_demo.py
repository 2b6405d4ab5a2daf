"""The README's main job: ``butifarra demo`` plays a hand and prints the comparison table."""

from __future__ import annotations

import io
import re

import pytest

from butifarra.cli import main
from butifarra.demo import run_demo


def test_demo_narrates_a_hand_and_prints_the_table() -> None:
    out = io.StringIO()
    assert run_demo(deals=16, seed=3, workers=1, out=out) == 0
    text = out.getvalue()
    assert len(re.findall(r"^trick +\d+:", text, flags=re.M)) == 12
    assert re.search(r"Points: team A \(0\+2\) (\d+), team B \(1\+3\) (\d+)", text)
    row = re.search(
        r"\| rule +\| random +\| ([+-]\d+\.\d\d) +\| \[([+-]\d+\.\d\d), ([+-]\d+\.\d\d)\]", text
    )
    assert row, text
    mean, lo, hi = map(float, row.groups())
    assert lo <= mean <= hi


def test_demo_is_reproducible_and_rejects_bad_counts(capsys) -> None:
    a, b = io.StringIO(), io.StringIO()
    run_demo(deals=8, seed=5, workers=1, out=a)
    run_demo(deals=8, seed=5, workers=1, out=b)
    assert a.getvalue() == b.getvalue()
    with pytest.raises(SystemExit) as e:
        main(["demo", "-n", "-3"])
    assert e.value.code == 2
    assert "expected an integer >= 1" in capsys.readouterr().err
