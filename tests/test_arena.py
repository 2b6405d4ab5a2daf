"""Arena: duplicate deals, reproducibility, statistics, round robin, CLI errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agents import RandomAgent, RuleBasedAgent, arena, stats
from agents.arena import CHUNK_DEALS, MATCH_HAND_FIELDS, MatchStats, duel, round_robin
from agents.stats import mean_ci, t_quantile
from butifarra.cli import main
from butifarra_env.options import Options
from butifarra_env.rules import deal

REPO = Path(__file__).resolve().parents[1]


def test_duplicate_deals_swap_the_teams_on_the_same_cards() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 40, seed=3)
    h = res.hands
    assert len(h["deal"]) == 80
    assert np.array_equal(h["deal"], np.repeat(np.arange(40), 2))
    assert np.array_equal(h["swapped"], np.tile([0, 1], 40))
    assert np.array_equal(h["dealer"][0::2], h["dealer"][1::2])  # same dealer both times
    assert np.all(h["points_a"] + h["points_b"] == 72)
    assert np.array_equal(h["diff_a"], h["score_a"] - h["score_b"])
    assert np.all((h["score_a"] == 0) | (h["score_b"] == 0))  # only one team scores
    won = h["points_a"] > 36
    assert np.array_equal(h["score_a"][won], (h["points_a"][won] - 36) * h["multiplier"][won])
    assert np.allclose(res.pair_means, h["diff_a"].reshape(40, 2).mean(axis=1))
    assert res.mean == pytest.approx(h["diff_a"].mean())
    assert res.win_share + res.loss_share + res.draw_share == pytest.approx(1.0)
    records = res.records()
    assert len(records) == 80 and set(records[0]) == set(h)


def test_identical_deterministic_agents_cancel_exactly() -> None:
    res = duel(RuleBasedAgent(), RuleBasedAgent(), 30, seed=1)
    assert np.all(res.pair_means == 0)  # each deal is the mirror image of the other play
    assert res.mean == 0


def test_results_depend_on_the_seed_not_on_the_worker_count() -> None:
    n = CHUNK_DEALS * 2 + 5  # three chunks, the last one partial
    one = duel("rule", "random", n, seed=11, workers=1)
    two = duel("rule", "random", n, seed=11, workers=2)
    again = duel("rule", "random", n, seed=11)
    for k in one.hands:
        assert np.array_equal(one.hands[k], two.hands[k])
        assert np.array_equal(one.hands[k], again.hands[k])
    other = duel("rule", "random", n, seed=12)
    assert not np.array_equal(one.hands["diff_a"], other.hands["diff_a"])


def test_match_results_do_not_depend_on_the_worker_count() -> None:
    n = CHUNK_DEALS + 3  # two chunks of matches
    one = duel("rule", "random", 1, seed=5, n_matches=n, target_score=40, workers=1)
    two = duel("rule", "random", 1, seed=5, n_matches=n, target_score=40, workers=2)
    assert one.matches is not None and two.matches is not None
    assert np.array_equal(one.matches.rows, two.matches.rows)
    for k in MATCH_HAND_FIELDS:
        assert np.array_equal(one.matches.hands[k], two.matches.hands[k])


def fixed_deal(rng: np.random.Generator) -> tuple[int, list[int]]:
    """Pluggable dealing: every deal the same (cards in id order from seat 1)."""
    return 0, deal(np.arange(48), 0)


def test_pluggable_dealing() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 6, seed=0, deal_fn=fixed_deal)
    assert np.all(res.hands["dealer"] == 0)
    # the rule-based side bids the same way on the same cards every time
    rule_first = res.hands["swapped"] == 0
    assert len(set(res.hands["trump"][rule_first].tolist())) == 1


def test_options_reach_the_games() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 30, seed=0, options=Options(max_doubling_level=0))
    assert np.all(res.hands["doubling_level"] == 0)


def test_mean_ci_matches_a_t_interval() -> None:
    assert arena.mean_ci is stats.mean_ci  # one function, re-exported for older imports
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    m, lo, hi = mean_ci(x)
    half = 2.776445 * x.std(ddof=1) / np.sqrt(5)  # t(0.975, 4)
    assert m == pytest.approx(4.0)
    assert (hi - lo) / 2 == pytest.approx(half, rel=1e-3)
    assert (lo + hi) / 2 == pytest.approx(4.0)
    assert t_quantile(0.975, 10) == pytest.approx(2.228139, rel=1e-4)
    assert t_quantile(0.975, 30) == pytest.approx(2.042272, rel=1e-5)
    assert t_quantile(0.975, 10**9) == pytest.approx(1.959964, rel=1e-6)


def test_rule_beats_random_in_duplicate_matches_to_101() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 4, seed=2, n_matches=8, target_score=101)
    m = res.matches
    assert m is not None and len(m.rows) == 16  # each match played with both seatings
    assert m.won_a >= 13, m.rows  # far above the 8 of equal players
    assert m.share_a == m.won_a / 16
    assert f"matches to 101: rule won {m.won_a}/16" in res.summary()


def match_plays(m: MatchStats) -> list[tuple[int, int, int, int, dict[str, np.ndarray]]]:
    """(match, swapped, a_won, hands, that play's per-hand columns) for each match played."""
    out = []
    for match, swapped, a_won, n_hands in m.rows.tolist():
        sel = (m.hands["deal"] == match) & (m.hands["swapped"] == swapped)
        out.append((match, swapped, a_won, n_hands, {k: v[sel] for k, v in m.hands.items()}))
    return out


@pytest.mark.parametrize("target", [40, 101])
def test_match_hands_rotate_the_dealer_and_stop_exactly_at_the_target(target: int) -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 1, seed=4, n_matches=6, target_score=target)
    m = res.matches
    assert m is not None and len(m.hands["deal"]) == m.rows[:, 3].sum()
    first_dealer = {}
    for match, _swapped, a_won, n_hands, h in match_plays(m):
        assert n_hands >= 1 and h["hand_number"].tolist() == list(range(n_hands))
        # the deal passes to the next player every hand
        assert h["dealer"].tolist() == [(h["dealer"][0] + k) % 4 for k in range(n_hands)]
        # both seatings of a match start with the same dealer
        assert first_dealer.setdefault(match, h["dealer"][0]) == h["dealer"][0]
        # each hand starts from the running totals of the hands before it...
        totals_a = np.cumsum(h["score_a"])
        totals_b = np.cumsum(h["score_b"])
        assert h["match_score_a"].tolist() == [0, *totals_a[:-1].tolist()]
        assert h["match_score_b"].tolist() == [0, *totals_b[:-1].tolist()]
        # ...no team had reached the target before the last hand, and one has after it
        assert np.all(np.maximum(totals_a, totals_b)[:-1] < target)
        assert max(totals_a[-1], totals_b[-1]) >= target
        assert a_won == int(totals_a[-1] >= target)
    assert m.won_a == m.rows[:, 2].sum()


def test_bad_counts_and_agents_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="n_deals must be an integer >= 1"):
        duel("rule", "random", -5)
    with pytest.raises(ValueError, match="unknown agent 'nobody'; allowed:"):
        duel("rule", "nobody", 5)
    with pytest.raises(ValueError, match="at least two agents"):
        round_robin({"rule": "rule"}, 5)


def test_round_robin_rates_and_writes_files_atomically(tmp_path: Path) -> None:
    rr = round_robin({"rule": "rule", "random": "random", "random2": RandomAgent(5)}, 40, seed=4)
    assert [r["agent"] for r in rr.ratings][0] == "rule"
    assert rr.matrix.shape == (3, 3)
    assert rr.matrix[0, 1] == pytest.approx(-rr.matrix[1, 0])
    assert "ordinal" in rr.table() and "rule" in rr.table()
    csv_path, json_path = rr.save(tmp_path / "sub" / "rr")
    assert csv_path.read_text().splitlines()[0].startswith("agent,mu,sigma")
    data = json.loads(json_path.read_text())
    assert len(data["duels"]) == 3 and data["n_deals"] == 40
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["rr.csv", "rr.json"]


# --------------------------------------------------------------------------- CLI
def test_cli_duel_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "duel"
    rc = main(["arena", "rule", "random", "-n", "20", "--no-progress", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "rule vs random: 20 duplicate deals" in text and "95% CI" in text
    assert json.loads(out.with_suffix(".json").read_text())["n_deals"] == 20
    assert len(out.with_suffix(".csv").read_text().splitlines()) == 41
    # a second run replaces both files whole and leaves no temporary file behind
    assert main(["arena", "rule", "random", "-n", "12", "--no-progress", "--out", str(out)]) == 0
    assert json.loads(out.with_suffix(".json").read_text())["n_deals"] == 12
    assert len(out.with_suffix(".csv").read_text().splitlines()) == 25
    assert sorted(p.name for p in tmp_path.iterdir()) == ["duel.csv", "duel.json"]


def test_cli_round_robin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arena", "rule", "random", "random", "-n", "10", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "random#2" in text and "rank" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["arena", "rule", "nobody"], "unknown agent 'nobody'; allowed: ppo, random, rule"),
        (["arena", "rule", "ppo:/no/such/ckpt.pt"], "PPO checkpoint not found"),
        (["arena", "rule"], "at least two agents"),
        (["arena", "rule", "random", "random", "--matches", "2"], "--matches is for two"),
    ],
)
def test_cli_errors_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_rejects_negative_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["arena", "rule", "random", "-n", "-3"])
    assert e.value.code == 2
    assert "expected an integer >= 1, got -3" in capsys.readouterr().err


def test_console_script_exit_status_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "broken.pt"
    bad.write_bytes(b"not a checkpoint")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from butifarra.cli import main; sys.exit(main())",
         "arena", "rule", f"ppo:{bad}", "-n", "5"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "ppo" in proc.stderr and "Traceback" not in proc.stderr
