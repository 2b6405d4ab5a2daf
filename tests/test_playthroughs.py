"""Replays the golden playthroughs; a diff means the rules or the encoding changed."""

from __future__ import annotations

import pytest

from tests.playthrough import CASES, DIR, playthrough


@pytest.mark.parametrize("name", sorted(CASES))
def test_playthrough_matches_golden_file(name: str) -> None:
    options, seed = CASES[name]
    expected = (DIR / f"{name}.txt").read_text(encoding="utf-8")
    actual = playthrough(options, seed)
    assert actual.splitlines() == expected.splitlines(), (
        "the playthrough changed; if intended, run `python -m tests.playthrough` "
        "and bump the env version when observations, actions or rewards changed"
    )
